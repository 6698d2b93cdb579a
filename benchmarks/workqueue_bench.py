"""Workqueue throughput and memory, beside a bare ``asyncio.Queue``.

Run: ``python -m benchmarks.workqueue_bench`` (figures are printed, not asserted).

Throughput: 10^5 distinct keys go through add → get → done with 1, 4 and 16 workers. A producer
adds them in batches of 1,000, letting the loop run between batches; each worker yields to the loop
once per item (``await asyncio.sleep(0)``, standing in for a reconcile's I/O) before ``done``. The
baseline runs the very same producer and workers on ``asyncio.Queue`` (``put_nowait`` / ``get`` /
``task_done``). A second table runs workers that never yield (pure queue overhead). Each figure is
the median of several runs, interleaved so that machine noise hits both queues alike.

Memory (tracemalloc): bytes per key while 10^5 keys are queued, and bytes still held after each of
three rounds of 10^5 *new* keys that are queued, fail once (``add_rate_limited``), are retried,
succeed (``forget``) and are ``done``. What stays is the capacity of the emptied hash tables (CPython
dicts keep their peak size, like Go maps): it must not grow with the number of keys ever seen.

Drain, as a new user meets the queue: a controller's queue is always named (so it carries the
``workqueue_*`` metrics), so ``RateLimitingQueue(name=...)`` with 4 workers that ``get`` and
``done``, 100,000 keys added at once, then ``shut_down_with_drain``; the baseline adds the keys to
a bare ``asyncio.Queue`` (``put_nowait``) and joins it with 4 ``get``/``task_done`` workers.
Median of 5 interleaved runs in this process, also for an unnamed queue and for
:class:`MinimalTimedQueue` (what bounds the named queue: only a dedup dict, a processing map and
the three clock reads the metrics need per item — ready, handed out, done); wall and CPU time.

The last lines are ``RATIO workqueue_vs_asyncio_queue <value>`` (pyctrl ``RateLimitingQueue``
cycles/s ÷ ``asyncio.Queue`` cycles/s, 4 workers, yielding workers, medians) and
``RATIO workqueue_named_vs_asyncio_queue <value>`` (the drain: named queue ÷ ``asyncio.Queue``).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections import deque
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from pyctrl.workqueue import FakeClock, RateLimitingQueue, ShutDown

KEYS = 100_000
BATCH = 1_000
WORKER_COUNTS = (1, 4, 16)
RUNS = 5
DRAIN_WORKERS = 4


class Sample(NamedTuple):
    rate: float  # cycles per second
    cpu: float  # CPU µs per key

    @classmethod
    def of(cls, keys: int, start: float, cpu_start: float) -> Sample:
        """The sample of ``keys`` cycles that began at ``perf_counter()`` ``start``, CPU ``cpu_start``."""
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        return cls(keys / wall, cpu * 1e6 / keys)


Run = Callable[[list[str], int, bool], Awaitable[Sample]]
Produce = Callable[[Callable[[str], None], list[str]], Awaitable[None]]


async def _produce(add: Callable[[str], None], keys: list[str]) -> None:
    for start in range(0, len(keys), BATCH):
        for key in keys[start : start + BATCH]:
            add(key)
        await asyncio.sleep(0)


async def _all_at_once(add: Callable[[str], None], keys: list[str]) -> None:
    for key in keys:
        add(key)


async def run_workqueue(
    keys: list[str], workers: int, yield_each: bool, *, name: str | None = None, produce: Produce = _produce
) -> Sample:
    """Cycles per second (and CPU µs per key) through a ``RateLimitingQueue`` (the controller's queue)."""
    queue = RateLimitingQueue[str](name=name)

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            if yield_each:
                await asyncio.sleep(0)
            queue.done(key)

    start, cpu = time.perf_counter(), time.process_time()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await produce(queue.add, keys)
    await queue.shut_down_with_drain()
    sample = Sample.of(len(keys), start, cpu)
    await asyncio.gather(*tasks)
    return sample


async def run_named_workqueue(keys: list[str], workers: int, yield_each: bool) -> Sample:
    """The same with metrics on (a named queue)."""
    return await run_workqueue(keys, workers, yield_each, name="bench")


async def run_asyncio_queue(
    keys: list[str], workers: int, yield_each: bool, *, produce: Produce = _produce
) -> Sample:
    """Cycles per second (and CPU µs per key) through a bare ``asyncio.Queue``."""
    queue: asyncio.Queue[str] = asyncio.Queue()

    async def worker() -> None:
        while True:
            await queue.get()
            if yield_each:
                await asyncio.sleep(0)
            queue.task_done()

    start, cpu = time.perf_counter(), time.process_time()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await produce(queue.put_nowait, keys)
    await queue.join()
    sample = Sample.of(len(keys), start, cpu)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return sample


class MinimalTimedQueue:
    """The least a metered dedup queue does per item: no priorities, delays, metrics or wake-ups."""

    def __init__(self) -> None:
        self._dirty: dict[str, float] = {}
        self._processing: dict[str, float] = {}
        self._fifo: deque[str] = deque()
        self.seconds = 0.0

    def add(self, key: str) -> None:
        if self._dirty.setdefault(key, -1.0) == -1.0:
            self._dirty[key] = time.monotonic()  # ready since
            if key not in self._processing:
                self._fifo.append(key)

    async def get(self) -> str:
        key = self._fifo.popleft()
        now = time.monotonic()
        self.seconds += now - self._dirty.pop(key)
        self._processing[key] = now
        return key

    def done(self, key: str) -> None:
        self.seconds += time.monotonic() - self._processing.pop(key)
        if key in self._dirty:
            self._fifo.append(key)


async def drain_minimal(keys: list[str]) -> Sample:
    """The drain case through :class:`MinimalTimedQueue` (one worker: it never waits)."""
    queue = MinimalTimedQueue()
    start, cpu = time.perf_counter(), time.process_time()
    for key in keys:
        queue.add(key)
    for _ in range(len(keys)):
        queue.done(await queue.get())
    return Sample.of(len(keys), start, cpu)


async def drain(keys: list[str]) -> float:
    """Print the drain table; return the named queue's cycles/s ÷ ``asyncio.Queue``'s (medians)."""
    w = DRAIN_WORKERS
    runs: dict[str, Callable[[], Awaitable[Sample]]] = {
        "asyncio.Queue": lambda: run_asyncio_queue(keys, w, False, produce=_all_at_once),
        "RateLimitingQueue(name=...)": lambda: run_workqueue(
            keys, w, False, name="bench-drain", produce=_all_at_once
        ),
        "RateLimitingQueue()": lambda: run_workqueue(keys, w, False, produce=_all_at_once),
        "MinimalTimedQueue (bound)": lambda: drain_minimal(keys),
    }
    samples: dict[str, list[Sample]] = {kind: [] for kind in runs}
    for _ in range(RUNS):
        for kind, run in runs.items():
            gc.collect()
            samples[kind].append(await run())
    rate = {kind: statistics.median(r for r, _ in values) for kind, values in samples.items()}
    cpu = {kind: statistics.median(c for _, c in values) for kind, values in samples.items()}
    base = rate["asyncio.Queue"]
    print(f"\ndrain: {len(keys):,} keys added, then shut_down_with_drain, {DRAIN_WORKERS} workers:")
    print("{:>28} {:>12} {:>6} {:>12}".format("queue", "cycles/s", "ratio", "CPU µs/key"))
    for kind in runs:
        print(f"{kind:>28} {rate[kind]:>12,.0f} {rate[kind] / base:>6.2f} {cpu[kind]:>12.2f}")
    return rate["RateLimitingQueue(name=...)"] / base


async def throughput(keys: list[str], yield_each: bool) -> dict[tuple[str, int], float]:
    """Median cycles/s per (queue kind, worker count)."""
    runs: dict[str, Run] = {
        "asyncio.Queue": run_asyncio_queue,
        "pyctrl": run_workqueue,
        "pyctrl+metrics": run_named_workqueue,
    }
    samples: dict[tuple[str, int], list[float]] = {}
    for workers in WORKER_COUNTS:
        for _ in range(RUNS):
            for kind, run in runs.items():
                gc.collect()
                samples.setdefault((kind, workers), []).append((await run(keys, workers, yield_each)).rate)
    return {key: statistics.median(values) for key, values in samples.items()}


def print_table(title: str, medians: dict[tuple[str, int], float]) -> None:
    print(f"\n{title}")
    header = ("workers", "asyncio.Queue/s", "pyctrl/s", "ratio", "pyctrl+metrics/s", "ratio")
    print("{:>7} {:>16} {:>12} {:>6} {:>17} {:>6}".format(*header))
    for workers in WORKER_COUNTS:
        base = medians["asyncio.Queue", workers]
        plain = medians["pyctrl", workers]
        named = medians["pyctrl+metrics", workers]
        row = f"{workers:>7} {base:>16,.0f} {plain:>12,.0f} {plain / base:>6.2f}"
        print(f"{row} {named:>17,.0f} {named / base:>6.2f}")


async def memory() -> None:
    """Bytes per queued key, and what stays behind after rounds of keys that come and go."""
    clock = FakeClock()
    queue = RateLimitingQueue[str](clock=clock)
    tracemalloc.start()
    try:
        for round_ in range(3):
            keys = [f"round-{round_}/object-{i}" for i in range(KEYS)]
            gc.collect()
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            for key in keys:
                queue.add(key)
            queued, _ = tracemalloc.get_traced_memory()
            while len(queue):
                key = await queue.get()
                queue.add_rate_limited(key)  # fails once
                queue.done(key)
            clock.step(1e6)  # past every delay (the 10 qps bucket spreads 10^5 retries over 10^4 s)
            while len(queue):
                key = await queue.get()
                queue.forget(key)  # then succeeds
                queue.done(key)
            del keys, key
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
            if round_ == 0:
                baseline = before
                per_key, peak_per_key = (queued - before) / KEYS, (peak - before) / KEYS
                print(
                    f"\nmemory: {per_key:.0f} B/key queued, {peak_per_key:.0f} B/key at the peak of a round"
                )
            seen = (round_ + 1) * KEYS
            print(f"memory: after round {round_ + 1} ({seen:,} keys seen): {after - baseline:,} B held")
    finally:
        tracemalloc.stop()


async def main() -> None:
    keys = [f"default/object-{i}" for i in range(KEYS)]
    print(f"workqueue benchmark: {KEYS:,} keys, batches of {BATCH:,}, median of {RUNS} runs")
    yielding = await throughput(keys, yield_each=True)
    print_table("workers yield once per item (cycles/s):", yielding)
    print_table("workers never yield (cycles/s):", await throughput(keys, yield_each=False))
    named = await drain(keys)
    await memory()
    ratio = yielding["pyctrl", 4] / yielding["asyncio.Queue", 4]
    print(f"RATIO workqueue_vs_asyncio_queue {ratio:.3f}")
    print(f"RATIO workqueue_named_vs_asyncio_queue {named:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
