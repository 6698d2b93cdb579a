"""The rate-limiting queue's guarantees (pyctrl/workqueue/_rate_limiting.py docstring)."""

from __future__ import annotations

import pytest

from pyctrl.workqueue import (
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
)

from ._util import assert_no_key_state


async def test_add_rate_limited_delays_the_item_by_what_the_limiter_says() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(base_delay=1, max_delay=60), clock=clock)
    queue.add_rate_limited("a")  # 1 s
    clock.step(0.999)
    assert len(queue) == 0
    clock.step(0.001)
    assert await queue.get() == "a"
    queue.add_rate_limited("a")  # 2 s, re-queued on done
    queue.done("a")
    clock.step(1.999)
    assert len(queue) == 0
    clock.step(0.001)
    assert len(queue) == 1


async def test_add_rate_limited_keeps_the_given_priority() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(base_delay=1), clock=clock)
    queue.add_rate_limited("a", priority=3)
    queue.add("b")
    clock.step(1)
    assert await queue.get_with_priority() == ("a", 3)


async def test_forget_and_num_requeues_delegate_to_the_limiter() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    queue = RateLimitingQueue[str](limiter, clock=FakeClock())
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == limiter.num_requeues("a") == 2
    queue.forget("a")
    assert queue.num_requeues("a") == 0


async def test_no_rate_limiter_means_the_default_controller_rate_limiter_on_the_queues_clock() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[int](clock=clock)
    assert isinstance(queue._rate_limiter, MaxOfRateLimiter)
    for key in range(100):  # the bucket's burst: each waits only its own 5 ms
        queue.add_rate_limited(key)
    queue.add_rate_limited(100)  # bucket empty: 0.1 s on the fake clock
    clock.step(0.005)
    assert len(queue) == 100
    clock.step(0.095)
    assert len(queue) == 101


async def test_add_rate_limited_after_shut_down_leaves_no_limiter_state() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    queue = RateLimitingQueue[str](limiter, clock=FakeClock())
    queue.shut_down()
    queue.add_rate_limited("a")
    assert limiter._failures == {}


@pytest.mark.parametrize("failures", [1, 3])
async def test_forget_and_done_leave_no_per_key_state(failures: int) -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](clock=clock, name=f"no-trace-{failures}")
    keys = [f"ns/obj-{i}" for i in range(300)]
    for key in keys:
        queue.add(key)
    for attempt in range(failures + 1):
        for _ in keys:
            key = await queue.get()
            if attempt < failures:
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            queue.done(key)
        clock.step(3600)
    assert len(queue) == 0
    assert_no_key_state(queue)
    assert clock.pending() == 0
    limiter = queue._rate_limiter
    assert isinstance(limiter, MaxOfRateLimiter)
    assert all(getattr(part, "_failures", {}) == {} for part in limiter._limiters)
    assert queue._metrics is not None
    assert queue._metrics._processing is queue._processing  # its only per-item state: empty
