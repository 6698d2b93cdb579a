"""Deadlines on an injected :class:`~pyctrl.workqueue.Clock`: ``asyncio.timeout``'s counterpart for
code whose time is a clock (so a test's ``FakeClock`` brings the deadline, not the wall clock).

Internal: the controller's reconciliation and cache-sync timeouts and the leader elector's renew
deadline and retry wait use it.

Guarantee: :func:`done_by` returns once ``task`` is done or ``clock`` reaches ``deadline``,
whichever comes first, and says which; a task that missed the deadline is cancelled and has
finished (its cleanup ran) when it returns; if the caller is cancelled, so is the task.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyctrl.workqueue import Clock

__all__ = ["done_by"]


async def done_by(clock: Clock, deadline: float, task: asyncio.Future[Any]) -> bool:
    """Wait for ``task`` until ``clock`` reaches ``deadline``; True when it finished in time."""
    sleeping = asyncio.ensure_future(clock.sleep_until(deadline))
    try:
        await asyncio.wait({sleeping, task}, return_when=asyncio.FIRST_COMPLETED)
        finished = task.done()
    finally:
        sleeping.cancel()
        task.cancel()  # a no-op once done
    if not finished:
        await asyncio.wait({task})
    return finished
