"""Templates (package data under ``templates/``) rendered with Jinja2, and the file writes of a
command.

Guarantees: rendering is strict (an undefined variable is an error, never an empty string);
:class:`Changes` collects every file a command will write and refuses, before anything is written,
a file that already exists (a command never overwrites a user's file); :func:`insert_at_marker`
edits a scaffolded file only at a ``# +pyctrl:scaffold:<name>`` marker line (kubebuilder's
``+kubebuilder:scaffold`` markers) and names the marker when it is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from pyctrl.scaffold._names import ScaffoldError

__all__ = ["Changes", "insert_at_marker", "render"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pyctrl.scaffold", "templates"),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # Python, YAML and Markdown, never HTML
)


def render(template: str, **context: Any) -> str:
    return _ENV.get_template(template).render(**context)


def insert_at_marker(text: str, marker: str, insertion: str, *, path: Path) -> str:
    """``text`` with ``insertion`` placed just before the line holding ``# +pyctrl:scaffold:marker``."""
    tag = f"# +pyctrl:scaffold:{marker}"
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == tag:
            return "".join([*lines[:i], insertion, *lines[i:]])
    raise ScaffoldError(f"{path}: the marker line {tag!r} is gone; put it back where the scaffold had it")


@dataclass
class Changes:
    """The files a command writes: new ones (refused when present) and edits of existing ones."""

    root: Path
    new: dict[Path, str] = field(default_factory=dict)
    edits: dict[Path, str] = field(default_factory=dict)
    executable: set[Path] = field(default_factory=set)

    def add(self, relative: str, text: str, *, executable: bool = False) -> None:
        path = self.root / relative
        if path.exists() or path in self.new:
            raise ScaffoldError(
                f"{path} already exists; the command would overwrite it (nothing was written)"
            )
        self.new[path] = text
        if executable:
            self.executable.add(path)

    def edit(self, relative: str, text: str) -> None:
        self.edits[self.root / relative] = text

    def read(self, relative: str) -> str:
        path = self.root / relative
        if path in self.edits:
            return self.edits[path]
        try:
            return path.read_text()
        except OSError as exc:
            raise ScaffoldError(f"{path}: cannot read a file the scaffold wrote: {exc}") from exc

    def write(self) -> list[str]:
        lines = []
        for path, text in sorted({**self.new, **self.edits}.items()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if path in self.executable:
                path.chmod(0o755)
            lines.append(f"{'created' if path in self.new else 'updated'} {path.relative_to(self.root)}")
        return lines
