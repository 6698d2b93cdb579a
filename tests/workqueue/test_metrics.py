"""The workqueue metrics' guarantees (pyctrl/workqueue/_metrics.py docstring)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import sys
import threading
from typing import Any

import pytest

from pyctrl.metrics import registry
from pyctrl.workqueue import FakeClock, ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue
from pyctrl.workqueue._metrics import QueueMetrics, _Collector, _get_collector, _Histogram, _Series

from ._util import assert_no_key_state

_names = itertools.count()


def unique_name() -> str:
    return f"test-metrics-{next(_names)}"


def queue_name(queue: Queue[str]) -> str:
    assert queue._metrics is not None
    names = [name for name, series in _get_collector()._series.items() if series is queue._metrics.series]
    return names[0]


def sample(metric: str, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(metric, {"name": name, "controller": name, **labels})


def test_metric_names_and_labels_are_exactly_the_reference_ones() -> None:
    name = unique_name()
    Queue[str](name=name)
    families = {metric.name: metric for metric in registry.collect() if metric.name.startswith("workqueue_")}
    # prometheus_client reports counters without their _total suffix (it is on the sample).
    assert set(families) == {
        "workqueue_depth",
        "workqueue_adds",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries",
    }
    samples = {s.name for metric in families.values() for s in metric.samples if s.labels.get("name") == name}
    assert {
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_count",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
    } <= samples
    for metric in families.values():
        for s in metric.samples:
            assert set(s.labels) - {"le"} == {"name", "controller"}


async def test_an_unnamed_queue_has_no_metrics() -> None:
    queue = Queue[str]()
    assert queue._metrics is None
    queue.add("a")
    queue.done(await queue.get())  # nothing to update, nothing fails


def test_one_collector_per_process_serves_every_named_queue() -> None:
    first = _get_collector()
    Queue[str](name=unique_name())
    Queue[str](name=unique_name())
    assert _get_collector() is first
    assert sum(collector is first for collector in registry._collector_to_names) == 1


async def test_series_are_resolved_once_per_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(), name=unique_name(), clock=clock)
    calls = 0
    original = _Collector.join

    def counting_join(self: _Collector, name: str, queue: QueueMetrics[Any]) -> _Series:
        nonlocal calls
        calls += 1
        return original(self, name, queue)

    monkeypatch.setattr(_Collector, "join", counting_join)
    queue.add("a")
    item = await queue.get()
    queue.add_rate_limited(item)
    queue.done(item)
    clock.step(1)
    assert sample("workqueue_adds_total", queue_name(queue)) == 2
    assert calls == 0


async def test_queues_sharing_a_name_share_its_series() -> None:
    name = unique_name()
    clock = FakeClock()
    first, second = Queue[str](name=name, clock=clock), Queue[str](name=name, clock=clock)
    first.add("a")
    second.add("a")
    assert sample("workqueue_adds_total", name) == 2
    assert sample("workqueue_depth", name) == 2
    await first.get()
    await second.get()
    clock.step(2)
    assert sample("workqueue_unfinished_work_seconds", name) == 4
    assert sample("workqueue_longest_running_processor_seconds", name) == 2


async def test_depth_adds_and_durations_follow_the_items() -> None:
    name = unique_name()
    clock = FakeClock()
    queue = Queue[str](name=name, clock=clock)
    queue.add("a")
    queue.add("b")
    queue.add("a")  # already queued: not an add
    assert sample("workqueue_adds_total", name) == 2
    assert sample("workqueue_depth", name) == 2
    clock.step(2)
    item = await queue.get()
    assert sample("workqueue_depth", name) == 1
    assert sample("workqueue_queue_duration_seconds_sum", name) == 2
    clock.step(3)
    queue.done(item)
    assert sample("workqueue_work_duration_seconds_sum", name) == 3
    assert sample("workqueue_work_duration_seconds_count", name) == 1


async def test_depth_counts_an_item_added_while_processing_until_it_is_handed_out_again() -> None:
    name = unique_name()
    queue = Queue[str](name=name, clock=FakeClock())
    queue.add("a")
    item = await queue.get()
    assert sample("workqueue_depth", name) == 0
    queue.add(item)  # added while processing: ready again, handed out after done (as client-go counts it)
    queue.add(item)  # a duplicate: neither an add nor depth
    assert (sample("workqueue_depth", name), sample("workqueue_adds_total", name)) == (1, 2)
    queue.done(item)
    assert sample("workqueue_depth", name) == 1
    queue.done(await queue.get())
    assert (sample("workqueue_depth", name), sample("workqueue_adds_total", name)) == (0, 2)
    assert sample("workqueue_queue_duration_seconds_count", name) == 2


async def test_a_garbage_collected_queue_takes_its_items_out_of_the_depth_but_not_out_of_the_adds() -> None:
    name = unique_name()
    kept, dropped = Queue[str](name=name), Queue[str](name=name)
    kept.add("a")
    dropped.add("b")
    dropped.add("c")
    assert (sample("workqueue_depth", name), sample("workqueue_adds_total", name)) == (3, 3)
    del dropped
    gc.collect()
    assert (sample("workqueue_depth", name), sample("workqueue_adds_total", name)) == (1, 3)
    assert len(kept) == 1


async def test_durations_land_in_controller_runtimes_buckets_from_10ns_to_1000s() -> None:
    name = unique_name()
    clock = FakeClock()
    queue = Queue[str](name=name, clock=clock)
    for seconds in [0.002, 0.01, 5000.0]:
        queue.add("a")
        clock.step(seconds)
        queue.done(await queue.get())
    buckets = {
        le: sample("workqueue_queue_duration_seconds_bucket", name, le=le)
        for le in ["1e-08", "0.001", "0.01", "0.1", "1000.0", "+Inf"]
    }
    assert buckets == {"1e-08": 0, "0.001": 0, "0.01": 2, "0.1": 2, "1000.0": 2, "+Inf": 3}
    assert sample("workqueue_queue_duration_seconds_count", name) == 3


async def test_both_histograms_bucket_every_duration_as_bisect_would_around_each_bound() -> None:
    # The queue computes bucket indexes with unrolled comparisons, in get() and in done():
    # each must put a duration in the bucket of the first bound at least as large.
    name = unique_name()
    bounds = [float(f"1e{exponent}") for exponent in range(-8, 4)]
    durations = [0.0, 5e3] + [
        value
        for bound in bounds
        for value in (math.nextafter(bound, 0), bound, math.nextafter(bound, math.inf))
    ]
    total = 0.0  # the sum, added up in the order observed
    for seconds in durations:
        total += seconds
        clock = FakeClock()  # at 0: the durations below are exactly `seconds`
        queue = Queue[str](name=name, clock=clock)
        queue.add("a")
        clock.step(seconds)
        item = await queue.get()  # queue duration: seconds - 0
        clock.step(seconds)
        queue.done(item)  # work duration: 2 * seconds - seconds, exact
    for histogram in ["workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"]:
        for bound, le in zip(bounds, _Histogram._NAMES, strict=False):
            scraped = sample(f"{histogram}_bucket", name, le=le)
            assert scraped == sum(1 for seconds in durations if seconds <= bound), (histogram, le)
        assert sample(f"{histogram}_bucket", name, le="+Inf") == len(durations)
        assert sample(f"{histogram}_sum", name) == total


async def test_retries_count_adds_with_a_positive_delay() -> None:
    name = unique_name()
    queue = RateLimitingQueue[str](name=name, clock=FakeClock())
    queue.add_after("a", 0)
    queue.add_after("a", 1)
    queue.add_after("b", 1)
    queue.add_rate_limited("c")
    assert sample("workqueue_retries_total", name) == 3


async def test_unfinished_work_and_longest_running_processor_are_computed_when_scraped() -> None:
    name = unique_name()
    clock = FakeClock()
    queue = Queue[str](name=name, clock=clock)
    queue.add("a")
    queue.add("b")
    await queue.get()
    clock.step(4)
    await queue.get()
    clock.step(1)
    assert sample("workqueue_unfinished_work_seconds", name) == 5 + 1
    assert sample("workqueue_longest_running_processor_seconds", name) == 5
    queue.done("a")
    queue.done("b")
    assert sample("workqueue_unfinished_work_seconds", name) == 0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0


async def test_metrics_keep_no_per_item_state_after_done() -> None:
    queue = Queue[str](name=unique_name(), clock=FakeClock())
    for key in ["a", "b", "c"]:
        queue.add(key)
    while len(queue):
        queue.done(await queue.get())
    assert queue._metrics is not None
    # The metrics' timestamps live in the queue's own dirty set and processing map: none is left.
    assert queue._metrics._processing is queue._processing
    assert queue._metrics._dirty is queue._ready_at
    assert_no_key_state(queue)


async def test_a_named_queue_on_the_real_clock_times_its_items() -> None:
    name = unique_name()
    queue = Queue[str](name=name)
    queue.add("a")
    item = await queue.get()
    assert sample("workqueue_longest_running_processor_seconds", name) is not None
    queue.done(item)
    assert sample("workqueue_queue_duration_seconds_count", name) == 1
    assert sample("workqueue_work_duration_seconds_count", name) == 1
    queue_seconds = sample("workqueue_queue_duration_seconds_sum", name)
    assert queue_seconds is not None
    assert 0 <= queue_seconds < 60


async def test_scrapes_from_another_thread_run_safely_beside_the_queue() -> None:
    name = unique_name()
    queue = Queue[int](name=name)
    collector = _get_collector()
    stop = threading.Event()
    errors: list[BaseException] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                collector.collect()
            except BaseException as error:
                errors.append(error)
                return

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, mid-scrape
    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for round_ in range(60):
            keys = range(round_ * 2000, round_ * 2000 + 2000)
            for key in keys:
                queue.add(key)
            taken = [await queue.get() for _ in keys]  # 2000 items being processed...
            for key in taken:
                queue.done(key)  # ...and finished, while the scraper reads
            await asyncio.sleep(0)  # yield to the scraper: no wall-clock wait, no deadline needed
    finally:
        stop.set()
        await asyncio.to_thread(scraper.join)
        sys.setswitchinterval(switch_interval)
    assert errors == []
    assert sample("workqueue_adds_total", name) == 60 * 2000
    assert sample("workqueue_depth", name) == 0
