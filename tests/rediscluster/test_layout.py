"""The operator's layout, read from its source (``ast``, nothing imported): each room depends only on
the rooms below it, and each engine's reconcile fits one screen.

``api`` (what the user declares) imports no other room; ``shared`` (what both modes use) only ``api``;
the two engines ``replication`` and ``cluster`` never import each other; no module of the operator
imports the demo (``examples/rediscluster_demo``), which lives outside the operator package.

An engine's own reconcile is its steps of ``engine.Engine`` (observe, plan, children, execute,
status): at most 40 lines in all, at most 15 a step, counted from each step's ``def`` to its last
line (signature, blank lines and comments included, a docstring not); the work goes to well-named
helpers in the engine's modules.
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


#: the most lines of an engine's reconcile (its steps together), and of one step
SCREEN, STEP = 40, 15
ENGINES = {
    "replication": ("replication/reconciler.py", "ReplicationModeReconciler"),
    "cluster": ("cluster/reconciler.py", "ClusterModeReconciler"),
}


def _methods(source: str, cls: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(source)
    found = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {f.name: f for f in found.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}


def _lines(step: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of ``step`` on screen: its ``def`` (decorators aside) to its last line, less a docstring."""
    assert step.end_lineno is not None
    lines = step.end_lineno - step.lineno + 1
    first = step.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


#: the steps of ``engine.Engine``, read from the protocol (``forget`` is no step of a reconcile)
STEPS = tuple(m for m in _methods((PACKAGE / "engine.py").read_text(), "Engine") if m != "forget")


def step_lines(path: str, cls: str) -> dict[str, int]:
    """step -> its lines (module docstring) in the engine class ``cls`` of ``path``."""
    methods = _methods((PACKAGE / path).read_text(), cls)
    return {step: _lines(methods[step]) for step in STEPS}


def test_the_steps_are_read_from_the_engine_protocol() -> None:
    assert STEPS == ("observe", "plan", "children", "execute", "status")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_engine_reconcile_fits_one_screen(engine: str) -> None:
    lengths = step_lines(*ENGINES[engine])
    assert sum(lengths.values()) <= SCREEN, lengths
    assert {step: n for step, n in lengths.items() if n > STEP} == {}


def test_the_count_sees_a_long_step() -> None:
    """A docstring is not counted, everything else from ``def`` to the last line is (a check that
    could not fail is none)."""
    body = "".join(f"        x{i} = {i}\n" for i in range(20))
    source = (
        "class E:\n    @staticmethod\n    async def execute(\n        a: int,\n    ) -> None:\n"
        '        """One\n        docstring."""\n\n        # a comment\n' + body
    )
    assert _lines(_methods(source, "E")["execute"]) == 3 + 2 + 20
    assert _lines(_methods(source, "E")["execute"]) > STEP
