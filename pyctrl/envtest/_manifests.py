"""Kubernetes manifests read from YAML/JSON files and directories (for CRDs and webhooks)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from pyctrl.envtest._errors import EnvtestError

__all__ = ["load_manifests"]


def load_manifests(paths: Iterable[Path | str]) -> list[dict[str, Any]]:
    """Every object in the YAML/JSON files and directories (sorted) named by ``paths``."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif path.is_file():
            files.append(path)
        else:
            raise EnvtestError(f"manifest path {path} does not exist")
    docs = []
    for f in files:
        try:
            docs += [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
        except yaml.YAMLError as exc:
            raise EnvtestError(f"{f}: not valid YAML: {exc}") from exc
    return docs
