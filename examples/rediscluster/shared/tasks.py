"""Background tasks of the operator's rooms (the replication prober, the cluster slot mover).

:func:`cancel_and_wait` is how each stops its tasks: every task is cancelled first, then each is
awaited, so none outlives the ``stop()`` that cancelled it (the manager's shutdown leaves no task
behind); a task's cancellation is absorbed, any other error it ended with propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel every task of ``tasks``, then wait until each has ended (module docstring)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
