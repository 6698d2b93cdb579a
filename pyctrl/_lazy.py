"""A package's public names imported on first use (PEP 562 module ``__getattr__`` and ``__dir__``).

A package ``__init__`` that re-exports names from its modules imports every one of those modules
when the package is imported, although a program uses a few of them (a controller uses no webhook,
no Job, no StatefulSet). With :func:`attributes`, such an ``__init__`` lists where each name lives
and imports nothing until a name is read::

    if _typing.TYPE_CHECKING:  # what mypy (and a reader) sees: the names and their types
        from pyctrl.client.objects.core import ConfigMap, Pod
    else:
        __getattr__, __dir__ = _lazy.attributes(
            __name__, {"pyctrl.client.objects.core": ("ConfigMap", "Pod")}
        )

(``__getattr__`` is defined only at run time: a module ``__getattr__`` that mypy saw would let
every misspelt name type-check; ``typing`` is imported as ``_typing``, so the package gains no
public name.) ``tests/test_lazy_imports.py`` checks that the names under
``TYPE_CHECKING`` and the ones given here are the same, from the same modules.

Guarantees: ``package.Name``, ``from package import Name`` and ``from package import *`` give the
object the eager import gave (the defining module's own), which is then bound on the package, so
``vars(package)`` holds it and later reads are plain attribute reads; a name in ``computed`` is
its function's value, computed once; a submodule named in ``submodules`` is imported when read
as an attribute (``pyctrl.client.objects.core``), as it was bound when the eager ``__init__``
imported it; ``dir(package)`` lists every lazy name; any other name raises ``AttributeError``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["attributes"]


def attributes(
    package: str,
    modules: Mapping[str, Iterable[str]],
    *,
    computed: Mapping[str, Callable[[], object]] | None = None,
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose names in ``modules`` (module → the
    names it defines) are imported on first use."""
    where = {name: module for module, names in modules.items() for name in names}
    values = dict(computed or {})
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
        elif name in values:
            value = values[name]()
        elif name in subs:
            return importlib.import_module(f"{package}.{name}")  # binds it on the package
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where, *values, *subs})

    return __getattr__, __dir__
