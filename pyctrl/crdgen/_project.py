"""Where generation reads its inputs: ``MODULE:NAME`` references and ``[tool.pyctrl.crdgen]``.

Mirrors the ``paths=./api/...`` argument and the Makefile target of a kubebuilder project: the
list of CRD models lives in ``pyproject.toml`` so ``python -m pyctrl.crdgen`` (and the staleness
test) need no arguments::

    [tool.pyctrl.crdgen]
    models = ["examples.rediscluster.api:RedisCluster"]
    output = "crds"          # relative to pyproject.toml; the default

Guarantees: a bad reference or a missing/ill-typed table raises :class:`CRDGenerationError` saying
which reference or key is wrong; :func:`load_config` puts the project directory first on
``sys.path`` so its modules import whatever the current directory.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyctrl.crdgen._meta import CRDGenerationError

__all__ = ["ProjectConfig", "import_object", "load_config"]


@dataclass(frozen=True)
class ProjectConfig:
    """The ``[tool.pyctrl.crdgen]`` table: model references and the output directory."""

    models: tuple[str, ...]
    output: Path


def load_config(pyproject: Path) -> ProjectConfig:
    """Read ``[tool.pyctrl.crdgen]`` from ``pyproject``; ``output`` is made absolute."""
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CRDGenerationError(f"{pyproject}: cannot read: {exc}") from exc
    table = data.get("tool", {}).get("pyctrl", {}).get("crdgen")
    if not isinstance(table, dict):
        raise CRDGenerationError(
            f'{pyproject}: no [tool.pyctrl.crdgen] table; add models = ["module:Class", ...] '
            "or pass MODULE:CLASS arguments"
        )
    models = table.get("models")
    if not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
        raise CRDGenerationError(
            f"{pyproject}: [tool.pyctrl.crdgen] models must be a non-empty list of strings"
        )
    output = table.get("output", "crds")
    if not isinstance(output, str) or not output:
        raise CRDGenerationError(f"{pyproject}: [tool.pyctrl.crdgen] output must be a directory name")
    root = pyproject.resolve().parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return ProjectConfig(models=tuple(models), output=root / output)


def import_object(ref: str) -> Any:
    """The object ``MODULE:NAME`` names (``NAME`` may be dotted: ``mod:Outer.Inner``)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise CRDGenerationError(
            f"{ref!r}: expected MODULE:NAME, e.g. examples.rediscluster.api:RedisCluster"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CRDGenerationError(f"{ref}: cannot import {module_name}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise CRDGenerationError(f"{ref}: {module_name} has no attribute {attr!r}") from exc
    return obj
