"""What the PYCTRL_TRACE hooks cost: off (the default) and on.

Run: ``python -m benchmarks.trace_bench`` (figures are printed, not asserted).

Off: every hook is ``if trace.ENABLED: trace.<stage>(...)``. The first figure is the cost of that
guard alone: a one-line function with the guard against the same function without it, called
10^6 times per round; rounds interleaved, medians of 15 rounds. A reconcile passes about nine hooks
(watch, store, handler, predicate, queue add, worker, reconcile, requeue, done), so nine times the
per-call difference bounds what tracing off adds to one event's path.

On: 10^4 keys through ``RateLimitingQueue`` add → get → done, with tracing off and with tracing on
writing to ``os.devnull`` (formatting and writing every line); medians of 9 interleaved rounds.

The last lines are ``RATIO trace_guard_vs_plain_call <v>`` and ``RATIO queue_cycle_traced_vs_off <v>``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from pyctrl import trace
from pyctrl.workqueue import RateLimitingQueue


def _plain(x: int) -> int:
    return x


def _guarded(x: int) -> int:
    if trace.ENABLED:
        trace.delay_elapsed(None, x)
    return x


def _calls(fn: object, n: int) -> float:
    f = fn  # local for the loop
    assert callable(f)
    start = time.perf_counter()
    for i in range(n):
        f(i)
    return (time.perf_counter() - start) / n


async def _cycle(keys: list[str]) -> float:
    q: RateLimitingQueue[str] = RateLimitingQueue(name="trace-bench")
    start = time.perf_counter()
    for key in keys:
        q.add(key)
    for _ in keys:
        item = await q.get()
        q.forget(item)
        q.done(item)
    return time.perf_counter() - start


def main() -> None:
    assert not trace.ENABLED, "run without PYCTRL_TRACE"
    n = 1_000_000
    plain, guarded = [], []
    for _ in range(15):
        plain.append(_calls(_plain, n))
        guarded.append(_calls(_guarded, n))
    p, g = statistics.median(plain), statistics.median(guarded)
    print(f"call without guard: {p * 1e9:6.1f} ns   with the off guard: {g * 1e9:6.1f} ns")
    print(f"guard cost per hook: {(g - p) * 1e9:.1f} ns; x9 hooks per event: {(g - p) * 9e9:.0f} ns")

    keys = [f"default/key-{i}" for i in range(10_000)]
    off, on = [], []
    with open(os.devnull, "w") as sink:
        for _ in range(9):
            off.append(asyncio.run(_cycle(keys)))
            with trace.tracing(sink):
                on.append(asyncio.run(_cycle(keys)))
    o, t = statistics.median(off), statistics.median(on)
    print(f"10^4 keys add/get/done: tracing off {o * 1e3:.1f} ms, on (to /dev/null) {t * 1e3:.1f} ms")
    print(f"RATIO trace_guard_vs_plain_call {g / p:.3f}")
    print(f"RATIO queue_cycle_traced_vs_off {t / o:.3f}")


if __name__ == "__main__":
    main()
