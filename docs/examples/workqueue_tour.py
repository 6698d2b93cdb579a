"""The workqueue's guarantees one by one, on a manual clock (the guide's "The workqueue" page).

    .venv/bin/python docs/examples/workqueue_tour.py

Each numbered step prints what the queue did; nothing here sleeps: time moves only when the
FakeClock is stepped.
"""

from __future__ import annotations

import asyncio

from pyctrl.workqueue import (
    LOW_PRIORITY,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
)


async def main() -> None:
    clock = FakeClock()
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.005, max_delay=1.0)
    q = RateLimitingQueue[str](limiter, clock=clock)

    # 1. Stingy: an item that is already waiting is not queued twice.
    q.add("default/a")
    q.add("default/a")
    print(f"1. default/a added twice -> {len(q)} queued")

    # 2. Never two workers on one item: an add while it is processed waits for done().
    item = await q.get()
    q.add(item)
    print(f"2. added again while processing -> {len(q)} queued")
    q.done(item)
    print(f"   after done({item}) -> {len(q)} queued (exactly one more run)")
    q.done(await q.get())

    # 3. Priorities: live changes go before the initial list's (LOW_PRIORITY) items.
    q.add("default/from-initial-list", priority=LOW_PRIORITY)
    q.add("default/live-change")
    first, second = await q.get(), await q.get()
    print(f"3. handed out first: {first}, then: {second}")
    q.done(first)
    q.done(second)

    # 4. Delays: add_after holds an item until its ready time on the queue's clock.
    q.add_after("default/later", 10.0)
    clock.step(9.9)
    print(f"4. add_after 10 s, 9.9 s later -> {len(q)} queued", end="")
    clock.step(0.1)
    print(f"; at 10 s -> {len(q)} queued")
    q.done(await q.get())

    # 5. Rate limiting: add_rate_limited waits as long as the limiter says; the delay doubles with
    #    every failure of the item, and forget() (on success) starts it over.
    q.add_rate_limited("default/flaky")  # failure 1
    clock.step(0.005)
    print(f"5. add_rate_limited, 5 ms later -> {len(q)} queued", end="")
    q.done(await q.get())
    later = [limiter.when("default/flaky") for _ in range(3)]  # what failures 2-4 would wait
    print(f"; failures 2-4 wait {', '.join(f'{d * 1000:g} ms' for d in later)}", end="")
    q.forget("default/flaky")
    print(f"; after forget: {q.num_requeues('default/flaky')} failures counted")

    # 6. Shutdown: adds are ignored, what is queued is still handed out, then get() raises.
    q.shut_down()
    q.add("default/too-late")
    print(f"6. after shut_down, an add -> {len(q)} queued")


if __name__ == "__main__":
    asyncio.run(main())
