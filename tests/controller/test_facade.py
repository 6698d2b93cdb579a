"""The pyctrl facade re-exports exactly the documented common names."""

from __future__ import annotations

import pyctrl
import pyctrl.testing


def test_every_public_name_of_the_facade_exists_and_is_listed_once() -> None:
    assert sorted(set(pyctrl.__all__)) == sorted(pyctrl.__all__)
    for name in pyctrl.__all__:
        assert getattr(pyctrl, name) is not None, name


def test_the_facade_exposes_the_controller_and_manager_names() -> None:
    assert {"Manager", "ControllerBuilder", "Request", "Result", "TerminalError", "Reconciler"} <= set(
        pyctrl.__all__
    )
    assert pyctrl.testing.__all__ == [
        "FaultProxy",
        "ProxyError",
        "Write",
        "assert_idempotent",
        "eventually",
        "recording_writes",
    ]
