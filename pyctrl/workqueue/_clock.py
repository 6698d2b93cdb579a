"""Clocks: where the workqueue reads the time and schedules its timers.

Mirrors ``k8s.io/utils/clock`` as used by client-go ``util/workqueue``: the queue never calls
``time`` or ``asyncio.sleep`` itself, it asks an injected :class:`Clock`. Production code uses
:class:`RealClock`; tests (pyctrl's and users') use :class:`FakeClock` and move time with
:meth:`FakeClock.step`, so delays are tested without sleeping.

Guarantees:

- ``now()`` is monotonic seconds (never goes backwards).
- A timer from ``call_at(deadline, callback)`` runs ``callback`` once, no earlier than ``deadline``
  on that clock, unless cancelled first; ``cancel()`` after it ran is a no-op.
- ``FakeClock.step(seconds)`` runs every timer due by the new time, synchronously, in deadline
  order (ties in scheduling order), with ``now()`` equal to each timer's deadline while it runs;
  timers scheduled by those callbacks are run too if due. Nothing runs outside ``step``.
- ``await clock.sleep_until(deadline)`` returns once ``now() >= deadline``.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock", "Timer"]


class Timer(Protocol):
    """A scheduled callback; what :meth:`Clock.call_at` returns."""

    def cancel(self) -> None:
        """Do not run the callback if it has not run yet."""


class Clock(Protocol):
    """Monotonic time plus deadline timers."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback()`` once ``now() >= deadline``. Must be called from the event loop's thread."""

    async def sleep_until(self, deadline: float) -> None:
        """Return once ``now() >= deadline``."""


class RealClock:
    """``time.monotonic`` plus the running asyncio loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        # call_later with a relative delay: the loop's own time base may differ from monotonic().
        return asyncio.get_running_loop().call_later(max(0.0, deadline - time.monotonic()), callback)

    async def sleep_until(self, deadline: float) -> None:
        await _sleep_until(self, deadline)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _sleep_until(clock: Clock, deadline: float) -> None:
    """Wait on ``clock``'s timers until ``clock.now() >= deadline`` (a loop timer may fire early)."""
    loop = asyncio.get_running_loop()
    while clock.now() < deadline:
        woken: asyncio.Future[None] = loop.create_future()
        timer = clock.call_at(deadline, functools.partial(_resolve, woken))
        try:
            await woken
        finally:
            timer.cancel()


class _FakeTimer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A manual clock for tests: time moves only when :meth:`step` is called.

    Usable from synchronous code; ``sleep_until`` needs a running loop (its waiters resume the next
    time the loop runs after the ``step`` that made them due).
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        # Heap of (deadline, scheduling order, timer); cancelled timers are dropped when reached.
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(callback)
        heapq.heappush(self._timers, (deadline, next(self._order), timer))
        return timer

    async def sleep_until(self, deadline: float) -> None:
        await _sleep_until(self, deadline)

    def pending(self) -> int:
        """How many timers are scheduled and not cancelled (lets tests check a queue left none)."""
        return sum(not timer.cancelled for _, _, timer in self._timers)

    def step(self, seconds: float) -> None:
        """Advance time by ``seconds`` (>= 0), running every timer that becomes due, in order."""
        if seconds < 0:
            raise ValueError(f"FakeClock cannot go backwards (step({seconds}))")
        target = self._now + seconds
        timers = self._timers
        while timers and timers[0][0] <= target:
            deadline, _, timer = heapq.heappop(timers)
            if timer.cancelled:
                continue
            timer.cancelled = True  # ran: a later cancel() is a no-op
            self._now = max(self._now, deadline)
            timer.callback()
        self._now = target
