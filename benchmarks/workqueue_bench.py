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

The last line is ``RATIO workqueue_vs_asyncio_queue <value>``: pyctrl ``RateLimitingQueue``
cycles/s ÷ ``asyncio.Queue`` cycles/s, 4 workers, yielding workers, medians.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable

from pyctrl.workqueue import FakeClock, RateLimitingQueue, ShutDown

KEYS = 100_000
BATCH = 1_000
WORKER_COUNTS = (1, 4, 16)
RUNS = 5

Run = Callable[[list[str], int, bool], Awaitable[float]]


async def _produce(add: Callable[[str], None], keys: list[str]) -> None:
    for start in range(0, len(keys), BATCH):
        for key in keys[start : start + BATCH]:
            add(key)
        await asyncio.sleep(0)


async def run_workqueue(keys: list[str], workers: int, yield_each: bool, *, name: str | None = None) -> float:
    """Cycles per second through a ``RateLimitingQueue`` (the controller's queue)."""
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

    start = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await _produce(queue.add, keys)
    await queue.shut_down_with_drain()
    elapsed = time.perf_counter() - start
    await asyncio.gather(*tasks)
    return len(keys) / elapsed


async def run_named_workqueue(keys: list[str], workers: int, yield_each: bool) -> float:
    """The same with metrics on (a named queue)."""
    return await run_workqueue(keys, workers, yield_each, name="bench")


async def run_asyncio_queue(keys: list[str], workers: int, yield_each: bool) -> float:
    """Cycles per second through a bare ``asyncio.Queue``."""
    queue: asyncio.Queue[str] = asyncio.Queue()

    async def worker() -> None:
        while True:
            await queue.get()
            if yield_each:
                await asyncio.sleep(0)
            queue.task_done()

    start = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await _produce(queue.put_nowait, keys)
    await queue.join()
    elapsed = time.perf_counter() - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return len(keys) / elapsed


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
                samples.setdefault((kind, workers), []).append(await run(keys, workers, yield_each))
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
    await memory()
    ratio = yielding["pyctrl", 4] / yielding["asyncio.Queue", 4]
    print(f"RATIO workqueue_vs_asyncio_queue {ratio:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
