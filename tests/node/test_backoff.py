"""Crash-loop back-off: first restart at once, then doubling to the cap, reset after a quiet spell."""

from __future__ import annotations

from pyctrl.envtest.node.container import Backoff


def test_first_restart_is_immediate_then_delays_double_up_to_the_cap() -> None:
    backoff = Backoff(initial=10, maximum=300)
    delays = [backoff.delay(now=float(t)) for t in range(0, 80, 10)]
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]


def test_back_off_resets_after_twice_the_cap_without_a_crash() -> None:
    backoff = Backoff(initial=1, maximum=5)
    assert [backoff.delay(0), backoff.delay(1), backoff.delay(2)] == [0, 1, 2]
    assert backoff.delay(2 + 10.5) == 0
    assert backoff.delay(13) == 1
