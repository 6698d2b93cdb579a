"""Helpers for the workqueue tests: wait for a condition by polling the loop, never by sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


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


def key_state(queue: Any) -> dict[str, Any]:
    """Every container of ``queue`` that holds keys, by name (all empty: no per-key state left)."""
    state = {
        "ready_at": queue._ready_at,
        "priority": queue._priority,
        "processing": queue._processing,
        "stale": queue._stale,
        "buckets": {priority: bucket for priority, bucket in queue._buckets.items() if bucket},
    }
    if hasattr(queue, "_heap"):
        state.update(waiting=queue._waiting, heap=queue._heap)
    return state


def assert_no_key_state(queue: Any) -> None:
    """``queue`` holds no reference to any key (and its counts agree: nothing queued or stale)."""
    assert {name: container for name, container in key_state(queue).items() if container} == {}
    assert (len(queue), queue._readded, queue._stale_count) == (0, 0, 0)
