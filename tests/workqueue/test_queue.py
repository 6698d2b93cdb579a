"""The base queue's guarantees (pyctrl/workqueue/_queue.py docstring), one test each."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TypeVar

import pytest

from pyctrl.workqueue import LOW_PRIORITY, Queue, ShutDown

from ._util import assert_no_key_state, let_tasks_run, until

K = TypeVar("K", bound=Hashable)


async def drain_now(queue: Queue[K]) -> list[K]:
    """Take (and finish) every queued item, in the order handed out."""
    items = []
    while len(queue):
        item = await queue.get()
        items.append(item)
        queue.done(item)
    return items


async def test_items_are_handed_out_first_in_first_out() -> None:
    queue = Queue[str]()
    for item in ["c", "a", "b"]:
        queue.add(item)
    assert await drain_now(queue) == ["c", "a", "b"]


async def test_higher_priority_is_handed_out_first() -> None:
    queue = Queue[str]()
    queue.add("low", priority=LOW_PRIORITY)
    queue.add("normal")
    queue.add("high", priority=10)
    queue.add("normal-2")
    assert await drain_now(queue) == ["high", "normal", "normal-2", "low"]


async def test_raising_the_priority_of_a_queued_item_moves_it_to_the_end_of_its_new_priority() -> None:
    queue = Queue[str]()
    queue.add("a", priority=LOW_PRIORITY)
    queue.add("b")
    queue.add("c", priority=LOW_PRIORITY)
    queue.add("a")
    assert await drain_now(queue) == ["b", "a", "c"]


async def test_adding_a_queued_item_again_does_not_queue_it_twice() -> None:
    queue = Queue[str]()
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert len(queue) == 2
    assert await drain_now(queue) == ["a", "b"]


async def test_adding_a_queued_item_keeps_the_highest_priority() -> None:
    queue = Queue[str]()
    queue.add("a", priority=5)
    queue.add("a", priority=1)
    queue.add("a", priority=LOW_PRIORITY)
    assert await queue.get_with_priority() == ("a", 5)


async def test_an_item_being_processed_is_not_handed_to_another_worker() -> None:
    queue = Queue[str]()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    assert len(queue) == 0
    second = asyncio.create_task(queue.get())
    await let_tasks_run()
    assert not second.done()
    queue.done("a")
    assert await asyncio.wait_for(second, timeout=5) == "a"


async def test_an_item_added_during_processing_runs_exactly_once_more() -> None:
    queue = Queue[str]()
    queue.add("a")
    item = await queue.get()
    for _ in range(5):
        queue.add("a")
    queue.done(item)
    assert len(queue) == 1
    assert await drain_now(queue) == ["a"]
    assert_no_key_state(queue)


async def test_an_item_added_during_processing_is_requeued_with_the_highest_priority_given_meanwhile() -> (
    None
):
    queue = Queue[str]()
    queue.add("a")
    await queue.get()
    queue.add("b", priority=3)
    queue.add("a", priority=1)
    queue.add("a", priority=7)
    queue.add("a", priority=2)
    queue.done("a")
    assert await queue.get_with_priority() == ("a", 7)
    assert await queue.get_with_priority() == ("b", 3)


async def test_get_waits_for_an_add() -> None:
    queue = Queue[str]()
    getter = asyncio.create_task(queue.get())
    await let_tasks_run()
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, timeout=5) == "a"


async def test_done_of_an_item_not_being_processed_raises_value_error() -> None:
    queue = Queue[str]()
    queue.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")
    assert len(queue) == 1


async def test_len_counts_only_items_ready_to_be_handed_out() -> None:
    queue = Queue[str]()
    queue.add("a")
    queue.add("b")
    await queue.get()
    assert len(queue) == 1
    queue.add("a")  # being processed: not ready
    assert len(queue) == 1


async def test_adds_after_shut_down_are_ignored() -> None:
    queue = Queue[str]()
    queue.shut_down()
    queue.add("a")
    assert len(queue) == 0
    assert queue.shutting_down()


async def test_get_hands_out_queued_items_after_shut_down_then_raises_shut_down() -> None:
    queue = Queue[str]()
    queue.add("a")
    queue.add("b")
    queue.shut_down()
    assert await drain_now(queue) == ["a", "b"]
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shut_down_wakes_every_waiting_get() -> None:
    queue = Queue[str]()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await let_tasks_run()
    queue.shut_down()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), timeout=5)
    assert all(isinstance(result, ShutDown) for result in results)


async def test_an_item_added_during_processing_before_shut_down_still_runs_once_more() -> None:
    queue = Queue[str]()
    queue.add("a")
    await queue.get()
    queue.add("a")
    queue.shut_down()
    queue.done("a")
    assert await drain_now(queue) == ["a"]


async def test_shut_down_with_drain_waits_for_queued_and_processing_items() -> None:
    queue = Queue[str]()
    for item in ["a", "b", "c"]:
        queue.add(item)
    held = await queue.get()
    queue.add(held)  # re-run after done
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await let_tasks_run()
    assert not drain.done()
    assert queue.shutting_down()
    queue.add("late")  # ignored
    queue.done(held)
    handled = await drain_now(queue)
    assert handled == ["b", "c", "a"]
    await asyncio.wait_for(drain, timeout=5)
    assert_no_key_state(queue)


async def test_shut_down_with_drain_returns_at_once_when_idle() -> None:
    queue = Queue[str]()
    await asyncio.wait_for(queue.shut_down_with_drain(), timeout=5)
    assert queue.shutting_down()


async def test_a_cancelled_get_does_not_lose_a_wake_up() -> None:
    queue = Queue[str]()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await let_tasks_run()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it can take the item
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, timeout=5) == "a"


async def test_a_cancelled_get_leaves_no_waiter_behind() -> None:
    queue = Queue[str]()
    getter = asyncio.create_task(queue.get())
    await until(lambda: len(queue._getters) == 1)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert len(queue._getters) == 0


async def test_done_leaves_no_per_key_state() -> None:
    queue = Queue[str]()
    keys = [f"key-{i}" for i in range(200)]
    for i, key in enumerate(keys):
        queue.add(key, priority=LOW_PRIORITY)
        queue.add(key, priority=i % 3)  # raised: leaves stale entries behind
    first = await queue.get()
    queue.add(first, priority=9)
    queue.done(first)
    await drain_now(queue)
    assert_no_key_state(queue)


async def test_stale_entries_never_outgrow_the_queued_items() -> None:
    queue = Queue[int]()
    for key in range(5000):
        queue.add(key, priority=LOW_PRIORITY)
    for priority in range(1, 4):
        for key in range(5000):
            queue.add(key, priority=priority)
    entries = sum(len(bucket) for bucket in queue._buckets.values())
    assert entries <= 2 * len(queue) + 1024
    # Compacting kept the order: every key once, at its last priority, in the order of its raise.
    assert await drain_now(queue) == list(range(5000))
    assert_no_key_state(queue)


@dataclass(frozen=True)
class Request:
    namespace: str
    name: str


async def test_any_hashable_item_can_be_queued() -> None:
    queue = Queue[Request]()
    queue.add(Request("default", "a"))
    queue.add(Request("default", "a"))
    assert len(queue) == 1
    assert await queue.get() == Request("default", "a")
