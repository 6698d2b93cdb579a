"""``python -m pyctrl.crdgen``: write (or ``--check``) one CRD file per group and kind.

Mirrors ``controller-gen crd paths=./... output:crd:dir=config/crd/bases``::

    python -m pyctrl.crdgen                               # models and output from pyproject.toml
    python -m pyctrl.crdgen pkg.api:Widget pkg.api:WidgetV2 -o crds/
    python -m pyctrl.crdgen --check                       # exit 1 and a diff summary when stale

Files are named ``<group>_<plural>.yaml``. Models of the same group and kind become the versions of
one CRD. Exit status: 0 up to date / written, 1 stale (``--check``), 2 bad input (the message
names the model or reference).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from pyctrl.crdgen._crd import generate_crd
from pyctrl.crdgen._meta import CRDGenerationError
from pyctrl.crdgen._output import check_files, dump_yaml, header, write_files
from pyctrl.crdgen._project import import_object, load_config

__all__ = ["check_crds", "main", "render_crds", "write_crds"]

TOOL = "pyctrl.crdgen"


def render_crds(models: Sequence[type[BaseModel]]) -> dict[str, str]:
    """File name → YAML text, one file per (group, kind), versions in one CRD."""
    by_kind: dict[tuple[str, str], list[type[BaseModel]]] = {}
    for model in models:
        gvk = getattr(model, "gvk", None)
        key = (gvk.group, gvk.kind) if gvk is not None else ("", getattr(model, "__name__", "?"))
        by_kind.setdefault(key, []).append(model)
    files: dict[str, str] = {}
    for group in by_kind.values():
        crd = generate_crd(*group)
        name = f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
        sources = ", ".join(f"{m.__module__}:{m.__qualname__}" for m in group)
        files[name] = dump_yaml(
            [crd], header(TOOL, f"source: {sources}", "regenerate: python -m pyctrl.crdgen")
        )
    return files


def write_crds(models: Sequence[type[BaseModel]], out_dir: Path) -> list[str]:
    """Write the CRDs of ``models`` into ``out_dir``; return what changed."""
    return write_files(_paths(models, out_dir), owned_dir=out_dir, tool=TOOL)


def check_crds(models: Sequence[type[BaseModel]], out_dir: Path) -> list[str]:
    """How ``out_dir`` differs from what :func:`write_crds` would write (``[]``: up to date)."""
    return check_files(_paths(models, out_dir), owned_dir=out_dir, tool=TOOL)


def _paths(models: Sequence[type[BaseModel]], out_dir: Path) -> dict[Path, str]:
    return {out_dir / name: text for name, text in render_crds(models).items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyctrl.crdgen", description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", metavar="MODULE:CLASS", help="CRD models (default: pyproject)")
    parser.add_argument("-o", "--output", type=Path, help="output directory (default: pyproject or crds)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when files are stale")
    parser.add_argument("--config", type=Path, default=Path("pyproject.toml"), help="pyproject.toml path")
    args = parser.parse_args(argv)
    try:
        refs, out_dir = list(args.models), args.output
        if not refs:
            config = load_config(args.config)
            refs, out_dir = list(config.models), out_dir or config.output
        models = [import_object(ref) for ref in refs]
        out_dir = out_dir or Path("crds")
        if args.check:
            problems = check_crds(models, out_dir)
            for problem in problems:
                print(problem)
            if problems:
                print(f"{len(problems)} CRD file(s) out of date; run: python -m {TOOL}", file=sys.stderr)
            return 1 if problems else 0
        for change in write_crds(models, out_dir) or [f"{out_dir}: up to date"]:
            print(change)
    except CRDGenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
