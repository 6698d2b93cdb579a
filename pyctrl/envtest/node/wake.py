"""One safe way for the local node's loops to sleep until an event or a deadline.

``set_or_timeout(event, seconds)`` returns when ``event`` is set or ``seconds`` have passed (None:
no limit), and lets a cancellation through. ``asyncio.wait_for(event.wait(), seconds)`` does not
always: on Python 3.11 a cancellation that arrives just as the event is set is lost (the wait
returns normally), and a loop around it then never sees that it was cancelled — a node stopping
right after a container exited waited for ever on its pod worker.
"""

from __future__ import annotations

import asyncio

__all__ = ["set_or_timeout"]


async def set_or_timeout(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; whether it is set."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return event.is_set()
