"""pyctrl.handler.with_priority: urgent requests are handed out before routine ones already queued.

A controller with one worker and two ``Channel`` sources: a routine one (``enqueue_request_for_object``,
priority 0, plus a ``LOW_PRIORITY`` one like periodic requeues) and an urgent one (the same handler
wrapped in ``with_priority``, as a health prober's channel is). The worker is held on a first
request while routine requests pile up; the order in which a recording reconciler then sees them
proves the property without any timing.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.controller import Controller
from pyctrl.event import CreateEvent, GenericEvent
from pyctrl.handler import enqueue_request_for_object, with_priority
from pyctrl.reconcile import Request, Result
from pyctrl.source import Channel
from pyctrl.testing import eventually
from pyctrl.workqueue import LOW_PRIORITY, FakeClock

URGENT = 100


class HeldRecorder:
    """Records the order of reconciles; the first one (``gate``) waits until ``release`` is set."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.release = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.order.append(request.name)
        if request.name == "gate":
            await self.release.wait()
        return Result()


def event(name: str) -> GenericEvent:
    return GenericEvent(ConfigMap(metadata=ObjectMeta(name=name, namespace="ns")))


async def test_a_with_priority_request_is_reconciled_before_every_routine_request_queued_earlier() -> None:
    recorder = HeldRecorder()
    controller = Controller(f"prio-{uuid.uuid4().hex[:8]}", recorder, clock=FakeClock())
    routine: asyncio.Queue[GenericEvent] = asyncio.Queue()
    resync: asyncio.Queue[GenericEvent] = asyncio.Queue()
    urgent: asyncio.Queue[GenericEvent] = asyncio.Queue()
    controller.watch(Channel(routine, enqueue_request_for_object()))
    controller.watch(Channel(resync, with_priority(enqueue_request_for_object(), LOW_PRIORITY)))
    controller.watch(Channel(urgent, with_priority(enqueue_request_for_object(), URGENT)))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.start(stop))
    try:
        routine.put_nowait(event("gate"))
        await eventually(lambda: recorder.order == ["gate"], within=10.0, what="the worker holds the gate")
        for i in range(5):
            resync.put_nowait(event(f"resync-{i}"))
        for i in range(20):
            routine.put_nowait(event(f"routine-{i:02d}"))
        await eventually(lambda: len(controller.queue) == 25, within=10.0, what="25 routine requests queued")
        urgent.put_nowait(event("failover"))
        # a request already waiting at priority 0 is raised in place, keeping one entry
        urgent.put_nowait(event("routine-07"))
        await eventually(
            lambda: len(controller.queue) == 26, within=10.0, what="the urgent request queued behind them"
        )
        recorder.release.set()
        await eventually(lambda: len(recorder.order) == 27, within=10.0, what="every request reconciled")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    routine_names = [f"routine-{i:02d}" for i in range(20) if i != 7]
    resync_names = [f"resync-{i}" for i in range(5)]
    assert recorder.order == ["gate", "failover", "routine-07", *routine_names, *resync_names]


class RecordingQueue:
    def __init__(self) -> None:
        self.added: list[tuple[Request, int]] = []

    def add(self, item: Request, *, priority: int = 0) -> None:
        self.added.append((item, priority))


def test_with_priority_overrides_the_priority_of_every_event_type_including_the_initial_list() -> None:
    queue = RecordingQueue()
    handler = with_priority(enqueue_request_for_object(), URGENT)
    obj: Any = ConfigMap(metadata=ObjectMeta(name="a", namespace="ns"))
    handler.create(CreateEvent(obj, is_in_initial_list=True), queue)
    handler.generic(GenericEvent(obj), queue)
    assert queue.added == [(Request("ns", "a"), URGENT)] * 2


def test_with_priority_refuses_what_is_not_a_handler_or_not_an_int() -> None:
    with pytest.raises(TypeError, match="not an event handler"):
        with_priority(object(), 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="priority must be an int"):
        with_priority(enqueue_request_for_object(), 1.5)  # type: ignore[arg-type]
