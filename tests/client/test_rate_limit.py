"""pyctrl.client.rest.TokenBucket: burst first, then one token per 1/qps seconds, on its clock."""

from __future__ import annotations

import asyncio

from pyctrl.client import rest
from pyctrl.testing import eventually
from pyctrl.workqueue import FakeClock


async def test_the_burst_passes_at_once_and_then_requests_wait_one_token_interval() -> None:
    clock = FakeClock(100.0)
    bucket = rest.TokenBucket(qps=10.0, burst=3, clock=clock)
    for _ in range(3):
        await bucket.acquire()  # the burst: no timer, no wait
    assert clock.pending() == 0
    fourth = asyncio.ensure_future(bucket.acquire())
    await eventually(lambda: clock.pending() == 1, within=5, what="the fourth request waiting")
    clock.step(0.099)
    assert clock.pending() == 1, "a token came before 1/qps"
    clock.step(0.001)
    await asyncio.wait_for(fourth, 5)
    clock.step(1.0)  # a quiet second refills the bucket up to the burst
    for _ in range(3):
        await bucket.acquire()
    assert clock.pending() == 0


async def test_concurrent_requests_are_served_one_token_interval_apart() -> None:
    clock = FakeClock()
    bucket = rest.TokenBucket(qps=10.0, burst=1, clock=clock)
    await bucket.acquire()
    waiting = [asyncio.ensure_future(bucket.acquire()) for _ in range(3)]
    await eventually(lambda: clock.pending() == 3, within=5, what="three requests waiting")
    left = []
    for _ in range(3):
        clock.step(0.1)
        left.append(clock.pending())
    assert left == [2, 1, 0]  # one token each 1/qps, in turn
    await asyncio.wait_for(asyncio.gather(*waiting), 5)
