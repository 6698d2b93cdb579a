"""An in-memory controller harness: a Controller fed by a Channel source, no apiserver, time on a
FakeClock (requeue delays and backoff elapse when the test steps it, never in real time)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.controller import Controller
from pyctrl.event import GenericEvent
from pyctrl.handler import enqueue_request_for_object
from pyctrl.reconcile import Request, Result
from pyctrl.source import Channel
from pyctrl.testing import eventually
from pyctrl.workqueue import FakeClock, ItemExponentialFailureRateLimiter

from ._util import RecordingLimiter

Behaviour = Callable[[Request, int], Awaitable[Result]]


async def succeed(request: Request, call: int) -> Result:
    return Result()


class ScriptedReconciler:
    """Runs ``behaviours[name](request, call_number)`` (default: success) and counts calls."""

    def __init__(self, behaviours: dict[str, Behaviour] | None = None) -> None:
        self.behaviours = behaviours or {}
        self.calls: Counter[str] = Counter()
        self.running: Counter[str] = Counter()
        self.max_running: Counter[str] = Counter()

    async def reconcile(self, request: Request) -> Result:
        self.calls[request.name] += 1
        self.running[request.name] += 1
        self.max_running[request.name] = max(self.max_running[request.name], self.running[request.name])
        try:
            behaviour = self.behaviours.get(request.name, succeed)
            return await behaviour(request, self.calls[request.name])
        finally:
            self.running[request.name] -= 1


class Harness:
    def __init__(
        self,
        controller: Controller,
        events: asyncio.Queue[GenericEvent],
        limiter: RecordingLimiter,
        clock: FakeClock,
    ):
        self.controller = controller
        self.events = events
        self.limiter = limiter
        self.clock = clock
        self.name = controller.name

    async def step_until(self, done: Callable[[], bool], what: str, *, step: float = 1.0) -> None:
        """Step the controller's clock ``step`` seconds at a time until ``done()`` holds: every
        delay then elapses at once; the real time spent is only the workers' scheduling."""

        def stepped() -> bool:
            if done():
                return True
            self.clock.step(step)
            return False

        await eventually(stepped, within=10.0, what=what, interval=0.01)

    def send(self, name: str, namespace: str = "ns") -> None:
        self.events.put_nowait(GenericEvent(ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace))))

    def delays(self, name: str, namespace: str = "ns") -> list[float]:
        return self.limiter.delays.get(Request(namespace, name), [])

    def requeues(self, name: str, namespace: str = "ns") -> int:
        return self.controller.queue.num_requeues(Request(namespace, name))


@contextlib.asynccontextmanager
async def running_controller(reconciler: Any, **options: Any) -> AsyncIterator[Harness]:
    """Start a controller (unique name) with a recording limiter and a FakeClock; stop it on exit."""
    limiter = RecordingLimiter(ItemExponentialFailureRateLimiter[Any](0.001, 1.0))
    clock = FakeClock()
    name = f"test-{uuid.uuid4().hex[:8]}"
    controller = Controller(name, reconciler, rate_limiter=limiter, clock=clock, **options)
    events: asyncio.Queue[GenericEvent] = asyncio.Queue()
    controller.watch(Channel(events, enqueue_request_for_object()))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.start(stop))
    try:
        yield Harness(controller, events, limiter, clock)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
