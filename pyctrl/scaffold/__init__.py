"""Scaffolding for Python operators: ``pyctrl init``, ``create api``, ``create webhook`` and
``generate`` (kubebuilder's CLI for pyctrl; the console script ``pyctrl`` and ``python -m pyctrl``).

A scaffolded project keeps kubebuilder's rooms: ``<package>/api/<version>/`` the types (pydantic
models with their CRD declarations), ``<package>/controllers/`` one level-triggered reconciler per
kind, ``<package>/webhooks/``, ``<package>/operator.py`` + ``__main__.py`` the wiring and the
manager's flags; ``crds/``, the Helm chart's generated files and ``config/`` come from the code
through :mod:`pyctrl.crdgen`, :mod:`pyctrl.rbacgen` and ``helm template``.

Pieces: :mod:`._names` (the naming rules), :mod:`._project` (the ``PROJECT`` record),
:mod:`._render` (Jinja2 templates shipped as package data, safe writes), :mod:`._commands`,
:mod:`._generate`, :mod:`._cli`. Guarantees, each tested in ``tests/scaffold/``: a refused command
writes nothing and says which rule it broke; a command never overwrites a file; ``generate`` is
deterministic and ``generate --check`` reports stale files; the generated project passes ruff,
``mypy --strict`` and its own envtest tests.

The names here are imported on first read (:mod:`pyctrl._lazy`): ``pyctrl init`` and ``pyctrl
create`` load neither the client nor the CRD and RBAC generators, which only ``generate`` needs.
"""

import typing as _typing

from pyctrl import _lazy

if _typing.TYPE_CHECKING:
    from pyctrl.scaffold._cli import main
    from pyctrl.scaffold._commands import create_api, create_webhook, init_project
    from pyctrl.scaffold._generate import find_helm, generate
    from pyctrl.scaffold._names import ScaffoldError
else:
    __getattr__, __dir__ = _lazy.attributes(
        __name__,
        {
            "pyctrl.scaffold._cli": ("main",),
            "pyctrl.scaffold._commands": ("create_api", "create_webhook", "init_project"),
            "pyctrl.scaffold._generate": ("find_helm", "generate"),
            "pyctrl.scaffold._names": ("ScaffoldError",),
        },
    )

__all__ = ["ScaffoldError", "create_api", "create_webhook", "find_helm", "generate", "init_project", "main"]
