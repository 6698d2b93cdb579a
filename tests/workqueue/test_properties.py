"""Property-based tests: random interleavings of adds, delays, workers and shutdown.

Several worker tasks take items and hold them until the program says ``Finish(worker)``; time moves
only by ``Step`` on a fake clock. A model records, per key, the adds made since the key was last
handed out (ready time, priority). Every hand-out is checked against it:

- the key is not being processed by another worker (never two workers on one item);
- an add is pending for it and one of them is due (no spurious or duplicate run; delays respected);
- it has the highest priority among queued keys, and is handed out with it (priority order).

Even workers take items with ``get_with_priority``, odd ones with ``get`` (whose hand-out code is
its own); the queue is named in half of the programs, so the metrics' inline updates run too, and
at the end every add that made a key ready must have been counted once in ``adds_total`` and in
both duration histograms (each such add is followed by exactly one hand-out and one ``done``).

At quiescent points ``len(queue)`` equals the number of queued keys (dedup). At the end the queue is
shut down with drain and every worker finishes: the drain must not return while work is left, and
every add accepted before the shutdown must have been followed by a run of its key (processed at
least once after its last add; with the checks above, an add during processing gives exactly one
more run), with no per-key state left in the queue.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from pyctrl.metrics import registry
from pyctrl.workqueue import (
    LOW_PRIORITY,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    Queue,
    RateLimitingQueue,
    ShutDown,
)

from ._util import assert_no_key_state, until


@dataclass(frozen=True)
class Add:
    key: int
    priority: int


@dataclass(frozen=True)
class AddAfter:
    key: int
    seconds: float
    priority: int


@dataclass(frozen=True)
class AddRateLimited:
    key: int


@dataclass(frozen=True)
class Forget:
    key: int


@dataclass(frozen=True)
class Finish:
    worker: int


@dataclass(frozen=True)
class Step:
    seconds: float


@dataclass(frozen=True)
class ShutDownNow:
    drain: bool


Op = Add | AddAfter | AddRateLimited | Forget | Finish | Step | ShutDownNow

keys = st.integers(0, 4)
priorities = st.sampled_from([LOW_PRIORITY, 0, 1, 5])
delays = st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.5])
workers = st.integers(0, 3)
# Weighted by repetition; shutdown is inserted once at most, by `programs`, so that most of a
# program runs before it.
ops: st.SearchStrategy[Op] = st.one_of(
    st.builds(Add, keys, priorities),
    st.builds(Add, keys, priorities),
    st.builds(AddAfter, keys, delays, priorities),
    st.builds(AddAfter, keys, delays, priorities),
    st.builds(AddRateLimited, keys),
    st.builds(Forget, keys),
    st.builds(Finish, workers),
    st.builds(Finish, workers),
    st.builds(Finish, workers),
    st.builds(Step, st.sampled_from([0.1, 0.25, 0.5, 1.0, 3.0])),
    st.builds(Step, st.sampled_from([0.1, 0.25, 0.5, 1.0, 3.0])),
)


@st.composite
def programs(draw: st.DrawFn) -> list[Op]:
    program: list[Op] = draw(st.lists(ops, min_size=10, max_size=80))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(program)))
        program.insert(at, ShutDownNow(drain=draw(st.booleans())))
    return program


BASE_DELAY, MAX_DELAY = 0.5, 2.0


@dataclass
class Model:
    clock: FakeClock
    # key -> (ready time, priority) of every add accepted since the key was last handed out.
    pending: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    processing: dict[int, int] = field(default_factory=dict)  # key -> worker
    failures: dict[int, int] = field(default_factory=dict)
    shut_down: bool = False
    runs: int = 0

    def add(self, key: int, seconds: float, priority: int) -> None:
        if not self.shut_down:
            self.pending.setdefault(key, []).append((self.clock.now() + max(seconds, 0.0), priority))

    def is_ready(self, key: int) -> bool:
        return any(ready_at <= self.clock.now() for ready_at, _ in self.pending.get(key, []))

    def queued(self) -> list[int]:
        return [key for key in self.pending if key not in self.processing and self.is_ready(key)]

    def priority(self, key: int) -> int:
        return max(priority for _, priority in self.pending[key])

    def handed_out(self, worker: int, key: int, priority: int | None) -> None:
        """``key`` was handed to ``worker`` with ``priority`` (None: by ``get``, which does not say)."""
        assert key not in self.processing, (
            f"{key} handed to worker {worker} while worker {self.processing[key]} has it"
        )
        assert self.is_ready(key), f"{key} handed out with no due add pending: {self.pending.get(key)}"
        assert priority in (None, self.priority(key))
        assert self.priority(key) == max(self.priority(other) for other in self.queued())
        del self.pending[key]
        self.processing[key] = worker
        self.runs += 1

    def finished(self, key: int) -> None:
        del self.processing[key]

    def shutting_down(self) -> None:
        self.shut_down = True
        # Items still waiting for their delay are dropped; ready ones will still run.
        self.pending = {key: adds for key, adds in self.pending.items() if self.is_ready(key)}


class Harness:
    """A queue, its workers and the model, driven one op at a time."""

    def __init__(self, worker_count: int, *, named: bool) -> None:
        self.clock = FakeClock()
        self.model = Model(self.clock)
        limiter = ItemExponentialFailureRateLimiter[int](BASE_DELAY, MAX_DELAY)
        self.queue = RateLimitingQueue[int](limiter, clock=self.clock, name=METRICS_NAME if named else None)
        self.state = ["getting"] * worker_count
        self.releases: list[asyncio.Future[None] | None] = [None] * worker_count
        self.workers = [asyncio.create_task(self.worker(index)) for index in range(worker_count)]
        self.drains: list[asyncio.Task[None]] = []
        self.drained = False

    async def worker(self, index: int) -> None:
        while True:
            self.state[index] = "getting"
            try:
                if index % 2:
                    key, priority = await self.queue.get(), None
                else:
                    key, priority = await self.queue.get_with_priority()
            except ShutDown:
                self.state[index] = "exited"
                return
            self.model.handed_out(index, key, priority)
            release = self.releases[index] = asyncio.get_running_loop().create_future()
            self.state[index] = "holding"
            await release
            self.state[index] = "finishing"
            self.model.finished(key)
            self.queue.done(key)

    def holding(self, index: int) -> bool:
        release = self.releases[index]
        return self.state[index] == "holding" and release is not None and not release.done()

    def quiet(self, index: int) -> bool:
        """Worker ``index`` can make no progress until the program acts."""
        idle = self.state[index] == "getting" and len(self.queue) == 0 and not self.queue.shutting_down()
        return self.state[index] == "exited" or self.holding(index) or idle

    def settled(self) -> bool:
        for task in self.workers:
            if task.done() and task.exception() is not None:
                raise AssertionError("a worker failed a check") from task.exception()
        return all(self.quiet(index) for index in range(len(self.state)))

    async def settle(self) -> None:
        await until(self.settled)
        assert len(self.queue) == len(self.model.queued())
        assert bool(self.queue._top) == bool(len(self.queue)), "the top bucket is empty iff nothing is queued"

    def finish(self, index: int) -> None:
        release = self.releases[index % len(self.state)]
        if self.holding(index % len(self.state)) and release is not None:
            release.set_result(None)

    async def drain(self) -> None:
        await self.queue.shut_down_with_drain()
        assert not self.model.processing, "drain returned while items were being processed"
        assert not self.model.queued(), "drain returned while items were queued"
        self.drained = True

    async def shut_down(self, *, drain: bool) -> None:
        self.model.shutting_down()
        if drain:
            self.drains.append(asyncio.create_task(self.drain()))
            await until(self.queue.shutting_down)
        else:
            self.queue.shut_down()

    async def apply(self, op: Op) -> None:
        model, queue = self.model, self.queue
        match op:
            case Add(key, priority):
                model.add(key, 0, priority)
                queue.add(key, priority=priority)
            case AddAfter(key, seconds, priority):
                model.add(key, seconds, priority)
                queue.add_after(key, seconds, priority=priority)
            case AddRateLimited(key):
                if not model.shut_down:
                    failures = model.failures[key] = model.failures.get(key, 0) + 1
                    model.add(key, min(math.ldexp(BASE_DELAY, failures - 1), MAX_DELAY), 0)
                queue.add_rate_limited(key)
            case Forget(key):
                model.failures.pop(key, None)
                queue.forget(key)
            case Finish(index):
                self.finish(index)
            case Step(seconds):
                self.clock.step(seconds)
            case ShutDownNow(drain=drain):
                await self.shut_down(drain=drain)
        await self.settle()

    async def finish_everything(self) -> None:
        """Let every delay expire, shut down with drain, and finish whatever the workers take."""
        self.clock.step(10)
        await self.settle()
        await self.shut_down(drain=True)
        for _ in range(1000):
            if all(state == "exited" for state in self.state):
                break
            for index in range(len(self.state)):
                self.finish(index)
            await self.settle()
        await asyncio.wait_for(asyncio.gather(*self.workers, *self.drains), timeout=5)


METRICS_NAME = "test-properties"


def counted() -> list[float]:
    """adds_total and the counts of both duration histograms of METRICS_NAME so far, as scraped."""
    labels = {"name": METRICS_NAME, "controller": METRICS_NAME}
    metrics = [
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count",
    ]
    return [registry.get_sample_value(metric, labels) or 0.0 for metric in metrics]


async def run_program(worker_count: int, program: list[Op], *, named: bool) -> None:
    before = counted()
    harness = Harness(worker_count, named=named)
    await harness.settle()
    for op in program:
        await harness.apply(op)
    await harness.finish_everything()

    queue, model = harness.queue, harness.model
    assert harness.drained
    assert model.pending == {}, f"adds never followed by a run: {model.pending}"
    assert model.processing == {}
    assert_no_key_state(queue)
    assert harness.clock.pending() == 0
    runs = model.runs if named else 0
    assert [now - then for now, then in zip(counted(), before, strict=True)] == [runs, runs, runs]


@settings(max_examples=1000, deadline=None)
@given(worker_count=st.integers(1, 4), program=programs(), named=st.booleans())
def test_random_interleavings_keep_every_queue_guarantee(
    worker_count: int, program: list[Op], named: bool
) -> None:
    asyncio.run(run_program(worker_count, program, named=named))


@dataclass(frozen=True)
class Take:
    pass


@settings(max_examples=500, deadline=None)
@given(
    program=st.lists(
        st.one_of(st.builds(Add, st.integers(0, 9), priorities), st.builds(Take)), min_size=10, max_size=80
    )
)
def test_items_are_handed_out_by_priority_then_first_in_first_out(program: list[Add | Take]) -> None:
    async def run() -> None:
        queue = Queue[int]()
        # key -> (priority, order it got that priority): the position the guarantee promises.
        queued: dict[int, tuple[int, int]] = {}
        for order, op in enumerate([*program, *[Take()] * 10]):
            match op:
                case Add(key, priority):
                    if key not in queued or priority > queued[key][0]:
                        queued[key] = (priority, order)
                    queue.add(key, priority=priority)
                case Take():
                    if not queued:
                        assert len(queue) == 0
                        continue
                    expected = min(queued, key=lambda key: (-queued[key][0], queued[key][1]))
                    key, priority = await queue.get_with_priority()
                    assert (key, priority) == (expected, queued.pop(expected)[0])
                    queue.done(key)
            assert len(queue) == len(queued)

    asyncio.run(run())
