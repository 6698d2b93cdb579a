"""The workqueue metrics' guarantees (pyctrl/workqueue/_metrics.py docstring)."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client.metrics import MetricWrapperBase

from pyctrl.metrics import registry
from pyctrl.workqueue import FakeClock, ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue
from pyctrl.workqueue._metrics import _get_families

_names = itertools.count()


def unique_name() -> str:
    return f"test-metrics-{next(_names)}"


def sample(metric: str, name: str) -> float | None:
    return registry.get_sample_value(metric, {"name": name, "controller": name})


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


def test_metric_families_are_created_once_per_process() -> None:
    first = _get_families()
    Queue[str](name=unique_name())
    Queue[str](name=unique_name())
    assert _get_families() is first


async def test_label_children_are_resolved_once_per_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(), name=unique_name(), clock=clock)
    calls = 0
    original = MetricWrapperBase.labels

    def counting_labels(self: MetricWrapperBase, *args: str, **kwargs: str) -> MetricWrapperBase:
        nonlocal calls
        calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MetricWrapperBase, "labels", counting_labels)
    queue.add("a")
    item = await queue.get()
    queue.add_rate_limited(item)
    queue.done(item)
    clock.step(1)
    assert calls == 0


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
    assert queue._metrics._add_times == {}
    assert queue._metrics._start_times == {}
