"""pyctrl.client.rest.TokenBucket: burst first, then one token per 1/qps seconds."""

from __future__ import annotations

import asyncio
import time

import pytest

from pyctrl.client import rest


async def test_the_burst_passes_at_once_and_then_requests_wait_one_token_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    bucket = rest.TokenBucket(qps=10.0, burst=3)
    for _ in range(3):
        await bucket.acquire()
    assert slept == []
    await bucket.acquire()
    assert slept == [pytest.approx(0.1)]
    now[0] += 1.0  # a quiet second refills the bucket up to the burst
    for _ in range(3):
        await bucket.acquire()
    assert len(slept) == 1
