"""Prometheus metrics of a named workqueue.

Mirrors controller-runtime ``pkg/internal/metrics/workqueue.go`` (itself client-go's
``defaultQueueMetrics``): the seven ``workqueue_*`` families with labels ``name`` and
``controller`` (both set to the queue's name), registered on :data:`pyctrl.metrics.registry`.

Guarantees:

- A queue without a name has no metrics object at all: the queue skips every metrics call.
- The families are created and registered once per process, on the first named queue; each queue
  resolves its label children once, at construction.
- ``workqueue_depth`` counts items that became ready and were not yet handed out; ``adds_total``
  counts adds that made an item ready to process (duplicates of a queued item are not counted);
  ``queue_duration_seconds`` observes ready→handed-out time; ``work_duration_seconds`` handed-out→done
  time; ``retries_total`` counts adds with a positive delay (``add_after``, ``add_rate_limited``).
- ``unfinished_work_seconds`` and ``longest_running_processor_seconds`` are computed when scraped
  (client-go updates them every 500 ms from a goroutine; computing at scrape needs no task).
- Per-item timestamps are dropped when the item is handed out / done: no per-key state remains.

Deliberate difference: controller-runtime ≥ 0.21 adds a ``priority`` label to ``workqueue_depth``;
pyctrl keeps the ``{name, controller}`` labels of the reference metric list.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Generic, NamedTuple, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from pyctrl.metrics import registry
from pyctrl.workqueue._clock import Clock

__all__ = ["QueueMetrics"]

T = TypeVar("T", bound=Hashable)

_LABELS = ("name", "controller")
# prometheus.ExponentialBuckets(10e-9, 10, 12): 10 ns … 1000 s.
_BUCKETS = tuple(10e-9 * 10**i for i in range(12))


class _Families(NamedTuple):
    depth: Gauge
    adds: Counter
    queue_duration: Histogram
    work_duration: Histogram
    unfinished: Gauge
    longest_running: Gauge
    retries: Counter


_families: _Families | None = None
_families_lock = threading.Lock()


def _get_families() -> _Families:
    global _families  # noqa: PLW0603 - created once per process, on first use
    with _families_lock:
        if _families is None:
            _families = _Families(
                depth=Gauge("workqueue_depth", "Current depth of workqueue", _LABELS, registry=registry),
                adds=Counter(
                    "workqueue_adds_total",
                    "Total number of adds handled by workqueue",
                    _LABELS,
                    registry=registry,
                ),
                queue_duration=Histogram(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested",
                    _LABELS,
                    buckets=_BUCKETS,
                    registry=registry,
                ),
                work_duration=Histogram(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                    _LABELS,
                    buckets=_BUCKETS,
                    registry=registry,
                ),
                unfinished=Gauge(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has been done that is in progress and hasn't been observed by "
                    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
                    "threads by observing the rate at which this increases.",
                    _LABELS,
                    registry=registry,
                ),
                longest_running=Gauge(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been running.",
                    _LABELS,
                    registry=registry,
                ),
                retries=Counter(
                    "workqueue_retries_total",
                    "Total number of items added to the workqueue with a non-zero delay "
                    "(rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
                    _LABELS,
                    registry=registry,
                ),
            )
        return _families


class QueueMetrics(Generic[T]):
    """The label children and per-item timestamps of one named queue. Event-loop thread only,
    except the two scrape-time gauges, which only read."""

    __slots__ = (
        "__weakref__",
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_queue_duration",
        "_retries",
        "_start_times",
        "_work_duration",
    )

    def __init__(self, name: str, clock: Clock) -> None:
        families = _get_families()
        self._clock = clock
        self._depth = families.depth.labels(name, name)
        self._adds = families.adds.labels(name, name)
        self._queue_duration = families.queue_duration.labels(name, name)
        self._work_duration = families.work_duration.labels(name, name)
        self._retries = families.retries.labels(name, name)
        # item -> when it became ready (removed when handed out).
        self._add_times: dict[T, float] = {}
        # item -> when it was handed out (removed on done).
        self._start_times: dict[T, float] = {}
        ref = weakref.ref(self)
        families.unfinished.labels(name, name).set_function(lambda: _unfinished_seconds(ref))
        families.longest_running.labels(name, name).set_function(lambda: _longest_running_seconds(ref))

    def add(self, item: T) -> None:
        """``item`` became ready to process."""
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()

    def get(self, item: T) -> None:
        """``item`` was handed to a worker."""
        self._depth.dec()
        now = self._clock.now()
        self._start_times[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._queue_duration.observe(now - added)

    def done(self, item: T) -> None:
        """The worker finished ``item``."""
        started = self._start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def retry(self) -> None:
        """An item was added with a positive delay."""
        self._retries.inc()


def _unfinished_seconds(ref: weakref.ref[QueueMetrics[T]]) -> float:
    metrics = ref()
    if metrics is None:
        return 0.0
    # list(): one C-level copy, safe against the event loop thread mutating the dict meanwhile.
    starts = list(metrics._start_times.values())
    return len(starts) * metrics._clock.now() - sum(starts)


def _longest_running_seconds(ref: weakref.ref[QueueMetrics[T]]) -> float:
    metrics = ref()
    if metrics is None:
        return 0.0
    starts = list(metrics._start_times.values())
    return metrics._clock.now() - min(starts) if starts else 0.0
