"""The delaying queue's guarantees (pyctrl/workqueue/_delaying.py docstring), on a fake clock."""

from __future__ import annotations

import asyncio

from pyctrl.workqueue import DelayingQueue, FakeClock, RealClock

from ._util import assert_no_key_state, let_tasks_run


def new_queue() -> tuple[DelayingQueue[str], FakeClock]:
    clock = FakeClock()
    return DelayingQueue[str](clock=clock), clock


def assert_nothing_waits(queue: DelayingQueue[str], clock: FakeClock) -> None:
    assert queue._waiting == {}
    assert queue._heap == []
    assert queue._timer is None
    assert clock.pending() == 0


async def take_all(queue: DelayingQueue[str]) -> list[tuple[str, int]]:
    taken = []
    while len(queue):
        item, priority = await queue.get_with_priority()
        taken.append((item, priority))
        queue.done(item)
    return taken


async def test_an_item_added_after_a_delay_is_not_handed_out_before_the_delay() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 10)
    getter = asyncio.create_task(queue.get())
    clock.step(9.999)
    await let_tasks_run()
    assert len(queue) == 0
    assert not getter.done()
    clock.step(0.001)
    assert await asyncio.wait_for(getter, timeout=5) == "a"
    assert_nothing_waits(queue, clock)


async def test_a_non_positive_delay_adds_at_once() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 0)
    queue.add_after("b", -1)
    assert len(queue) == 2
    assert clock.pending() == 0


async def test_re_adding_a_waiting_item_keeps_the_earliest_ready_time() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 5)
    queue.add_after("a", 2)
    queue.add_after("a", 8)
    clock.step(2)
    assert await take_all(queue) == [("a", 0)]
    clock.step(10)
    assert len(queue) == 0
    assert_nothing_waits(queue, clock)


async def test_re_adding_a_waiting_item_keeps_the_highest_priority() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 1, priority=4)
    queue.add_after("a", 3, priority=1)
    queue.add_after("a", 0.5, priority=2)
    clock.step(0.5)
    assert await take_all(queue) == [("a", 4)]


async def test_adding_a_waiting_item_without_delay_makes_it_ready_now_with_the_higher_priority() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 100, priority=6)
    queue.add("a", priority=1)
    assert await take_all(queue) == [("a", 6)]
    assert_nothing_waits(queue, clock)
    clock.step(100)
    assert len(queue) == 0


async def test_delaying_a_queued_item_only_raises_its_priority() -> None:
    queue, clock = new_queue()
    queue.add("a")
    queue.add("b", priority=1)
    queue.add_after("a", 100, priority=2)
    assert clock.pending() == 0
    assert await take_all(queue) == [("a", 2), ("b", 1)]


async def test_only_items_whose_ready_time_has_come_are_queued() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 1)
    queue.add_after("b", 1.2)
    queue.add_after("c", 1.5)
    clock.step(1)
    assert len(queue) == 1
    clock.step(0.4)
    assert len(queue) == 2
    clock.step(0.1)
    assert len(queue) == 3


async def test_items_becoming_ready_are_queued_in_order_of_ready_time() -> None:
    queue, clock = new_queue()
    queue.add_after("c", 3)
    queue.add_after("a", 1)
    queue.add_after("b", 2)
    queue.add_after("b2", 2)
    clock.step(5)
    assert [item for item, _ in await take_all(queue)] == ["a", "b", "b2", "c"]


async def test_items_becoming_ready_queue_behind_items_already_queued_at_their_priority() -> None:
    queue, clock = new_queue()
    queue.add_after("delayed", 1)
    queue.add_after("delayed-high", 1, priority=5)
    queue.add("queued")
    clock.step(1)
    assert [item for item, _ in await take_all(queue)] == ["delayed-high", "queued", "delayed"]


async def test_a_delayed_item_that_becomes_ready_while_processed_is_requeued_on_done() -> None:
    queue, clock = new_queue()
    queue.add("a")
    await queue.get()
    queue.add_after("a", 1)
    clock.step(1)
    assert len(queue) == 0
    queue.done("a")
    assert await take_all(queue) == [("a", 0)]


async def test_shut_down_drops_waiting_items_and_cancels_the_timer() -> None:
    queue, clock = new_queue()
    queue.add_after("a", 1)
    queue.add("b")
    queue.shut_down()
    assert_nothing_waits(queue, clock)
    clock.step(5)
    assert await take_all(queue) == [("b", 0)]


async def test_add_after_after_shut_down_is_ignored() -> None:
    queue, clock = new_queue()
    queue.shut_down()
    queue.add_after("a", 1)
    queue.add_after("b", 0)
    clock.step(2)
    assert len(queue) == 0
    assert_nothing_waits(queue, clock)


async def test_only_one_timer_is_pending_at_a_time() -> None:
    queue, clock = new_queue()
    for i in range(50):
        queue.add_after(f"k{i}", 50 - i)
    assert clock.pending() == 1
    clock.step(25.5)
    assert len(queue) == 25
    assert clock.pending() == 1


async def test_no_state_remains_once_waiting_items_are_processed() -> None:
    queue, clock = new_queue()
    for i in range(100):
        queue.add_after(f"k{i}", 1 + i % 7)
        queue.add_after(f"k{i}", 0.5 + i % 3)
    queue.add_after("superseded", 1000)
    queue.add("superseded")
    clock.step(10)
    assert len(await take_all(queue)) == 101
    assert_nothing_waits(queue, clock)
    assert_no_key_state(queue)


async def test_stale_heap_entries_never_outnumber_live_ones() -> None:
    queue, clock = new_queue()
    for i in range(1000):
        queue.add_after(f"k{i}", 1000)
    for delay in range(999, 900, -1):
        for i in range(1000):
            queue.add_after(f"k{i}", delay)
    assert len(queue._heap) <= 2 * len(queue._waiting) + 65
    clock.step(901)
    assert len(queue) == 1000
    assert_nothing_waits(queue, clock)


async def test_delays_work_on_the_real_clock() -> None:
    queue = DelayingQueue[str](clock=RealClock())
    start = RealClock().now()
    queue.add_after("a", 0.02)
    assert await asyncio.wait_for(queue.get(), timeout=5) == "a"
    assert RealClock().now() - start >= 0.02
