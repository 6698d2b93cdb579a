"""The ``PROJECT`` file: what was scaffolded (kubebuilder's ``PROJECT``).

Every command reads it, checks the request against it (a kind created twice, a webhook for an API
that does not exist, a second controller for a kind) and writes it back with what it added, so
commands are idempotent in the sense that a repeated one is refused with a clear message and
changes nothing. ``pyctrl generate`` reads it to know the models, reconcilers and webhooks.

Guarantees: :func:`load` refuses a file that is missing or malformed naming the key; :func:`save`
writes deterministic YAML (the same project gives the same bytes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pyctrl.scaffold._names import ScaffoldError, plural, snake

__all__ = ["FILE", "LAYOUT", "Project", "Resource", "find_root", "load", "save"]

FILE = "PROJECT"
LAYOUT = "pyctrl.dev/v1"
_HEAD = "# Written by `pyctrl` (init, create api, create webhook): what was scaffolded. Do not edit.\n"


@dataclass
class Resource:
    """One version of one kind, with what was scaffolded for it."""

    group: str
    version: str
    kind: str
    namespaced: bool = True
    api: bool = True
    controller: bool = False
    scale: bool = False
    storage: bool = True
    defaulting: bool = False
    validation: bool = False
    conversion: bool = False  # this version is the hub of a conversion

    @property
    def plural(self) -> str:
        return plural(self.kind)

    @property
    def module(self) -> str:
        """The module name of the kind in its version package (``memcached``)."""
        return snake(self.kind)

    def matches(self, group: str, version: str, kind: str) -> bool:
        return (self.group, self.version, self.kind) == (group, version, kind)


@dataclass
class Project:
    domain: str
    project_name: str
    owner: str = ""
    layout: str = LAYOUT
    resources: list[Resource] = field(default_factory=list)

    @property
    def package(self) -> str:
        return snake(self.project_name)

    def api_group(self, group: str) -> str:
        return f"{group}.{self.domain}"

    def find(self, group: str, version: str, kind: str) -> Resource | None:
        return next((r for r in self.resources if r.matches(group, version, kind)), None)

    def versions_of(self, group: str, kind: str) -> list[Resource]:
        return [r for r in self.resources if (r.group, r.kind) == (group, kind)]

    def hub_of(self, group: str, kind: str) -> Resource | None:
        return next((r for r in self.versions_of(group, kind) if r.conversion), None)


def find_root(start: Path) -> Path:
    """The directory holding ``PROJECT``: ``start`` or one of its parents."""
    for candidate in (start, *start.parents):
        if (candidate / FILE).is_file():
            return candidate
    raise ScaffoldError(f"no {FILE} file in {start} or its parents: run `pyctrl init` first")


def load(root: Path) -> Project:
    path = root / FILE
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise ScaffoldError(f"{path}: expected a mapping")
    if data.get("layout") != LAYOUT:
        raise ScaffoldError(f"{path}: layout {data.get('layout')!r} is not {LAYOUT!r}")
    try:
        resources = [Resource(**_snake_keys(r)) for r in data.get("resources") or []]
        return Project(
            domain=data["domain"],
            project_name=data["projectName"],
            owner=data.get("owner", ""),
            resources=resources,
        )
    except (KeyError, TypeError) as exc:
        raise ScaffoldError(f"{path}: malformed: {exc}") from exc


def save(root: Path, project: Project) -> None:
    data: dict[str, Any] = {
        "layout": project.layout,
        "domain": project.domain,
        "projectName": project.project_name,
        "owner": project.owner,
        "resources": [_camel_keys(asdict(r)) for r in project.resources],
    }
    (root / FILE).write_text(_HEAD + yaml.safe_dump(data, sort_keys=False))


def _camel_keys(data: dict[str, Any]) -> dict[str, Any]:
    return {k.split("_")[0] + "".join(p.title() for p in k.split("_")[1:]): v for k, v in data.items()}


def _snake_keys(data: dict[str, Any]) -> dict[str, Any]:
    return {snake(k): v for k, v in data.items()}
