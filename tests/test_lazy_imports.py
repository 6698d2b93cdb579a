"""The packages that import their names on first read (:mod:`pyctrl._lazy`): what mypy sees is what
runs, and a controller of its own kinds loads none of the parts it does not use.

The last test runs in a fresh interpreter: this test process has imported everything already.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

LAZY = ["pyctrl", "pyctrl.client", "pyctrl.client.objects", "pyctrl.scaffold"]


def _type_checking_imports(package: types.ModuleType) -> dict[str, str]:
    """The names the package's ``if _typing.TYPE_CHECKING:`` block imports, and from where."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    assert imp.module is not None
                    found.update({alias.name: imp.module for alias in imp.names})
    return found


@pytest.mark.parametrize("name", LAZY)
def test_each_name_mypy_sees_is_the_one_read_at_run_time(name: str) -> None:
    package = importlib.import_module(name)
    seen = _type_checking_imports(package)
    assert seen, f"{name} has no TYPE_CHECKING imports"
    for attr, module in seen.items():
        assert getattr(package, attr) is getattr(importlib.import_module(module), attr), attr


@pytest.mark.parametrize("name", LAZY)
def test_dir_lists_the_public_names_and_the_submodules_and_nothing_else(name: str) -> None:
    package = importlib.import_module(name)
    listed = {n for n in dir(package) if not n.startswith("_")}
    names = {n for n in listed if not isinstance(getattr(package, n), types.ModuleType)}
    assert names == set(package.__all__)
    for n in listed - names:  # a sub-package, e.g. pyctrl.client.objects.core
        assert getattr(package, n).__name__ == f"{name}.{n}"
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_the_scheme_registers_the_built_in_kinds_before_kinds_added_later() -> None:
    from pyctrl.client.gvk import GroupVersionKind
    from pyctrl.client.objects import ConfigMap, KubeObject
    from pyctrl.client.scheme import Scheme, _builtin_kinds

    class MyConfigMap(KubeObject):  # the same GVK as the built-in ConfigMap
        gvk = GroupVersionKind("", "v1", "ConfigMap")

    scheme = Scheme()
    scheme._first = _builtin_kinds
    scheme.add(MyConfigMap)
    assert scheme.type_for(ConfigMap.gvk) is MyConfigMap  # added after the built-ins: it wins
    assert len(scheme.known_kinds()) == len(_builtin_kinds())


def test_a_controller_of_its_own_kind_loads_no_built_in_kind_webhook_or_leader_election() -> None:
    script = """
        import json, sys
        from pyctrl import ControllerBuilder, Manager, Request, Result
        from pyctrl.client import Config, GroupVersionKind, KubeObject

        class Widget(KubeObject):
            gvk = GroupVersionKind("example.com", "v1", "Widget")

        class Reconciler:
            async def reconcile(self, request: Request) -> Result:
                return Result()

        mgr = Manager(Config(host="https://127.0.0.1:1"), metrics_bind_address="0")
        ControllerBuilder(mgr).for_(Widget).complete(Reconciler())
        unused = ("pyctrl.client.objects.core", "pyctrl.client.objects.workloads",
                  "pyctrl.client.objects.batch", "pyctrl.webhook", "pyctrl.leaderelection",
                  "pyctrl.conversion", "pyctrl.sharding", "jsonpatch")
        print(json.dumps([m for m in unused if m in sys.modules]))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
