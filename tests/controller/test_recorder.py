"""pyctrl.recorder: Events with correlation (count bumps, per-object token bucket), injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from pyctrl.client.fake import FakeClient
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.recorder import EventBroadcaster, EventRecorder
from pyctrl.testing import Write, recording_writes
from pyctrl.workqueue import FakeClock

EVENT = GroupVersionKind("", "v1", "Event")


def involved(name: str = "web") -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}"))


class Fixture:
    def __init__(self, client: FakeClient, clock: FakeClock, recorder: EventRecorder, writes: list[Write]):
        self.client, self.clock, self.recorder, self.writes = client, clock, recorder, writes

    async def flush(self, broadcaster: EventBroadcaster) -> None:
        """Run the broadcaster until everything recorded so far is written (it flushes on stop)."""
        stop = asyncio.Event()
        stop.set()
        await broadcaster.start(stop)

    async def events(self) -> list[dict[str, Any]]:
        return list(await self.client.list(EVENT, namespace="ns"))


@pytest.fixture
async def env() -> AsyncIterator[tuple[Fixture, Callable[[], Any]]]:
    client, clock = FakeClient(), FakeClock(1000.0)
    broadcaster = EventBroadcaster(client, clock=clock)
    with recording_writes(client) as writes:
        fx = Fixture(client, clock, broadcaster.new_recorder("widget-controller"), writes)
        yield fx, lambda: fx.flush(broadcaster)


async def test_a_repeated_event_bumps_count_and_last_timestamp_instead_of_creating_another(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    for _ in range(3):
        fx.recorder.event(involved(), "Warning", "FailedScale", "cannot scale")
    await flush()
    (event,) = await fx.events()
    assert event["count"] == 3
    assert event["reason"] == "FailedScale"
    assert event["involvedObject"]["uid"] == "uid-web"
    assert event["source"] == {"component": "widget-controller"}
    assert [w.verb for w in fx.writes] == ["POST", "PUT/PATCH", "PUT/PATCH"]


async def test_a_different_message_or_object_makes_a_new_event(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    fx.recorder.event(involved(), "Normal", "Scaled", "to 3")
    fx.recorder.event(involved(), "Normal", "Scaled", "to 4")
    fx.recorder.event(involved("db"), "Normal", "Scaled", "to 3")
    await flush()
    assert sorted((e["involvedObject"]["name"], e["message"]) for e in await fx.events()) == [
        ("db", "to 3"),
        ("web", "to 3"),
        ("web", "to 4"),
    ]


async def test_a_hot_loop_costs_at_most_the_burst_then_one_write_per_refill_period(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    for i in range(100):
        fx.recorder.event(involved(), "Warning", "Failed", f"attempt {i}")
    await flush()
    assert len(fx.writes) == 25  # burst
    fx.clock.step(299)
    fx.recorder.event(involved(), "Warning", "Failed", "still failing")
    await flush()
    assert len(fx.writes) == 25  # less than one token refilled
    fx.clock.step(1)
    fx.recorder.event(involved(), "Warning", "Failed", "still failing")
    fx.recorder.event(involved(), "Warning", "Failed", "still failing")
    await flush()
    assert len(fx.writes) == 26
    # another object has its own bucket
    fx.recorder.event(involved("db"), "Warning", "Failed", "x")
    await flush()
    assert len(fx.writes) == 27


async def test_similar_events_are_combined_from_the_tenth_distinct_message(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    for i in range(12):
        fx.recorder.event(involved(), "Warning", "Failed", f"attempt {i}")
    fx.recorder.event(involved(), "Warning", "OtherReason", "attempt 0")  # not similar: own event
    await flush()
    by_reason = sorted((e["reason"], e["message"], e["count"]) for e in await fx.events())
    assert by_reason == sorted(
        [
            *(("Failed", f"attempt {i}", 1) for i in range(9)),
            ("Failed", "(combined from similar events): attempt 11", 3),
            ("OtherReason", "attempt 0", 1),
        ]
    )
    # after the window the messages count afresh
    fx.clock.step(601)
    fx.recorder.event(involved(), "Warning", "Failed", "attempt 12")
    await flush()
    assert ("Failed", "attempt 12", 1) in [(e["reason"], e["message"], e["count"]) for e in await fx.events()]


async def test_a_repeat_after_the_correlation_window_creates_a_new_event(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    fx.recorder.event(involved(), "Normal", "Synced", "ok")
    await flush()
    fx.clock.step(601)
    fx.recorder.event(involved(), "Normal", "Synced", "ok")
    await flush()
    assert [e["count"] for e in await fx.events()] == [1, 1]


async def test_a_repeat_of_an_event_deleted_meanwhile_creates_it_again(
    env: tuple[Fixture, Callable[[], Any]],
) -> None:
    fx, flush = env
    fx.recorder.event(involved(), "Normal", "Synced", "ok")
    await flush()
    (event,) = await fx.events()
    await fx.client.delete(event)
    fx.recorder.event(involved(), "Normal", "Synced", "ok")
    await flush()
    assert [e["count"] for e in await fx.events()] == [1]


def test_the_recorder_rejects_unknown_types_and_empty_reasons() -> None:
    recorder = EventBroadcaster(FakeClient()).new_recorder("c")
    with pytest.raises(ValueError, match="Normal"):
        recorder.event(involved(), "Info", "Reason", "m")
    with pytest.raises(ValueError, match="reason"):
        recorder.event(involved(), "Normal", "", "m")


async def test_recording_never_blocks_and_drops_beyond_the_buffer() -> None:
    client = FakeClient()
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("c")
    for i in range(1100):
        recorder.event(involved(f"o{i}"), "Normal", "R", "m")  # returns at once: nothing written yet
    assert len(await client.list(EVENT, namespace="ns")) == 0
    stop = asyncio.Event()
    stop.set()
    await broadcaster.start(stop)
    assert len(await client.list(EVENT, namespace="ns")) == 1000
