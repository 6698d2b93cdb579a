"""The pyctrl facade (controller-runtime's ``alias.go``) and pyctrl.testing export exactly their
documented names, as the workqueue's public list is checked."""

from __future__ import annotations

import types

import pyctrl
import pyctrl.testing

FACADE = [
    "ApiClient",
    "BuilderError",
    "Config",
    "Controller",
    "ControllerBuilder",
    "ControllerError",
    "Manager",
    "ManagerError",
    "Reconciler",
    "Request",
    "Result",
    "Runnable",
    "TerminalError",
    "WebhookBuilder",
    "get_logger",
    "load_config",
    "setup_logging",
]

TESTING = [
    "FaultProxy",
    "ProxyError",
    "RecordableClient",
    "RecordingTransport",
    "Write",
    "assert_idempotent",
    "eventually",
    "recording_writes",
]


def _public(module: types.ModuleType) -> set[str]:
    """Names a user reaches as ``module.name``: not private, not a submodule, not an import helper."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }


def test_the_facade_exports_exactly_the_documented_names() -> None:
    assert pyctrl.__all__ == FACADE
    for name in FACADE:  # the facade imports its names on first read: this binds them all
        assert getattr(pyctrl, name).__module__.startswith("pyctrl."), name
    assert _public(pyctrl) == set(FACADE)


def test_pyctrl_testing_exports_exactly_its_helpers() -> None:
    assert pyctrl.testing.__all__ == TESTING
    helpers = {
        n for n in _public(pyctrl.testing) if getattr(pyctrl.testing, n).__module__ == "pyctrl.testing"
    }
    assert helpers == set(TESTING) - {"RecordableClient", "FaultProxy", "ProxyError"}
    for name in ("FaultProxy", "ProxyError"):  # the fault-injecting TCP proxy, from its own module
        assert getattr(pyctrl.testing, name).__module__ == "pyctrl._faultproxy"
