"""The operator's layout, read from its imports (``ast``, nothing imported): each room depends only on
the rooms below it.

``api`` (what the user declares) imports no other room; ``shared`` (what both modes use) only ``api``;
the two engines ``replication`` and ``cluster`` never import each other; no module of the operator
imports the demo (``examples/rediscluster_demo``), which lives outside the operator package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "rediscluster"
OPERATOR = "examples.rediscluster"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, module: str, *, package: bool = False) -> set[str]:
    """Every module ``source`` (the text of ``module``) imports, at any depth (in functions and
    ``TYPE_CHECKING`` blocks too), relative imports resolved; ``package``: it is an ``__init__``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - node.level + package]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _room(module: str) -> str | None:
    """The room of an operator module: ``api``, ``shared``, ``replication``, ``cluster``, ``backup``
    or ``wiring`` (the modules at the top); None outside the operator."""
    if module != OPERATOR and not module.startswith(OPERATOR + "."):
        return None
    top = module.removeprefix(OPERATOR).lstrip(".").split(".")[0]
    return top if top in {"api", "shared", "replication", "cluster", "backup"} else "wiring"


MODULES = {
    _module(p): _imports(p.read_text(), _module(p), package=p.name == "__init__.py")
    for p in sorted(PACKAGE.rglob("*.py"))
}
#: room -> the rooms it may import (itself always)
ALLOWED = {
    "api": {"api"},
    "shared": {"api", "shared"},
    "replication": {"api", "shared", "replication", "backup"},
    "cluster": {"api", "shared", "cluster", "backup"},
}


def test_the_layout_is_read_from_every_module() -> None:
    rooms = {_room(m) for m in MODULES}
    assert {"api", "shared", "replication", "cluster", "backup", "wiring"} <= rooms
    assert len(MODULES) > 40


def test_no_operator_module_imports_the_demo() -> None:
    demo = {
        m: sorted(i for i in imps if i.startswith("examples.rediscluster_demo"))
        for m, imps in MODULES.items()
    }
    assert {m: i for m, i in demo.items() if i} == {}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    wrong = {
        m: sorted(i for i in imps if _room(i) not in ALLOWED[room] | {None})
        for m, imps in MODULES.items()
        if _room(m) == room
    }
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_check_sees_a_forbidden_import() -> None:
    """Imports in functions and relative ones are found (a check that could not fail is none)."""
    source = (
        "def f():\n    from examples.rediscluster.replication import topology\n"
        "from ..replication import observe\n"
    )
    found = _imports(source, "examples.rediscluster.cluster.x")
    assert "examples.rediscluster.replication.topology" in found
    assert "examples.rediscluster.replication.observe" in found
    assert {_room(i) for i in found} - ALLOWED["cluster"] == {"replication"}
