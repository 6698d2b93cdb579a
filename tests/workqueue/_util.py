"""Helpers for the workqueue tests: wait for a condition by polling the loop, never by sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(condition: Callable[[], bool], *, within: float = 5.0) -> None:
    """Let other tasks run until ``condition()`` holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0)  # yield one loop turn; the poll has the deadline above


async def let_tasks_run(rounds: int = 20) -> None:
    """Give every ready task a few turns of the loop (to show something does *not* happen)."""
    for _ in range(rounds):
        await asyncio.sleep(0)  # yield one loop turn: no wall-clock wait, so no deadline needed
