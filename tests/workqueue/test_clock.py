"""The clocks' guarantees (pyctrl/workqueue/_clock.py docstring)."""

from __future__ import annotations

import asyncio

import pytest

from pyctrl.workqueue import Clock, FakeClock, RealClock

from ._util import let_tasks_run


def test_fake_clock_moves_only_when_stepped() -> None:
    clock = FakeClock(start=100.0)
    assert clock.now() == 100.0
    assert clock.now() == 100.0
    clock.step(2.5)
    assert clock.now() == 102.5


def test_fake_clock_runs_due_timers_in_deadline_order_at_their_deadline() -> None:
    clock = FakeClock()
    seen: list[tuple[str, float]] = []
    clock.call_at(3, lambda: seen.append(("c", clock.now())))
    clock.call_at(1, lambda: seen.append(("a", clock.now())))
    clock.call_at(1, lambda: seen.append(("a2", clock.now())))
    clock.call_at(7, lambda: seen.append(("late", clock.now())))
    clock.step(5)
    assert seen == [("a", 1), ("a2", 1), ("c", 3)]
    assert clock.now() == 5
    assert clock.pending() == 1


def test_fake_clock_runs_timers_scheduled_by_timers_when_due() -> None:
    clock = FakeClock()
    seen: list[float] = []

    def first() -> None:
        seen.append(clock.now())
        clock.call_at(clock.now() + 1, lambda: seen.append(clock.now()))
        clock.call_at(clock.now() + 10, lambda: seen.append(clock.now()))

    clock.call_at(1, first)
    clock.step(3)
    assert seen == [1, 2]


def test_a_cancelled_timer_never_runs() -> None:
    clock = FakeClock()
    seen: list[str] = []
    timer = clock.call_at(1, lambda: seen.append("ran"))
    timer.cancel()
    assert clock.pending() == 0
    clock.step(2)
    assert seen == []


def test_fake_clock_refuses_to_go_backwards() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="backwards"):
        clock.step(-1)


async def test_fake_clock_sleep_until_returns_once_the_deadline_has_passed() -> None:
    clock = FakeClock()
    sleeper = asyncio.create_task(clock.sleep_until(5))
    await let_tasks_run()
    clock.step(4)
    await let_tasks_run()
    assert not sleeper.done()
    clock.step(1)
    await asyncio.wait_for(sleeper, timeout=5)
    assert clock.pending() == 0


async def test_real_clock_timer_runs_no_earlier_than_its_deadline() -> None:
    clock: Clock = RealClock()
    fired: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    deadline = clock.now() + 0.02
    clock.call_at(deadline, lambda: fired.set_result(clock.now()))
    assert await asyncio.wait_for(fired, timeout=5) >= deadline - 0.002  # loop clock resolution


async def test_real_clock_sleep_until_returns_once_the_deadline_has_passed() -> None:
    clock = RealClock()
    deadline = clock.now() + 0.02
    await asyncio.wait_for(clock.sleep_until(deadline), timeout=5)
    assert clock.now() >= deadline
