"""Prometheus metrics of named workqueues.

Mirrors controller-runtime ``pkg/internal/metrics/workqueue.go`` (itself client-go's
``defaultQueueMetrics``): the seven ``workqueue_*`` families with labels ``name`` and
``controller`` (both set to the queue's name), exposed on :data:`pyctrl.metrics.registry`.

Guarantees:

- A queue without a name has no metrics object at all: the queue skips every metrics update.
- One collector per process, registered on the first named queue, exposes all seven families. Each
  queue resolves its name's series (what client_golang calls label children) once, at construction;
  queues sharing a name share the series, as they would share label children.
- ``workqueue_depth`` counts items that became ready and were not yet handed out (items added again
  while being processed included, as in client-go): it is the size of the dirty set, read when
  scraped, summed over the live queues of the name (a queue that is garbage-collected takes its
  items out of the depth). ``adds_total`` counts adds that made an item ready to process
  (duplicates of a queued item are not counted);
  ``queue_duration_seconds`` observes ready→handed-out time; ``work_duration_seconds`` handed-out→done
  time; ``retries_total`` counts adds with a positive delay (``add_after``, ``add_rate_limited``).
- ``unfinished_work_seconds`` and ``longest_running_processor_seconds`` are computed when scraped
  (client-go updates them every 500 ms from a goroutine; computing at scrape needs no task).
- Per-item timestamps live in the queue's own dirty set (ready time) and processing map (start
  time), so they go with the item: no per-key state remains, and no extra hash lookup is made.
- Scrapes may run on another thread: they only read (copying each container in one C call).

Why a collector and not ``Counter``/``Histogram`` objects: their ``inc``/``observe`` take a lock and
cost 1 to 3 µs each, five of them per item, which made a named queue ~10 times slower than an unnamed
one. Here the queue updates its series in its hot paths without a lock: per item, one counter
and two histogram observations (plain numbers, :class:`pyctrl._histogram.Histogram`, the bucket
index found by four float comparisons) plus three clock reads.

Deliberate difference: controller-runtime ≥ 0.21 adds a ``priority`` label to ``workqueue_depth``;
pyctrl keeps the ``{name, controller}`` labels of the reference metric list.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sized
from typing import Any, Generic, NamedTuple, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from pyctrl._histogram import Histogram
from pyctrl.metrics import registry
from pyctrl.workqueue._clock import Clock, RealClock

__all__ = ["QueueMetrics"]

T = TypeVar("T", bound=Hashable)

_LABELS = ("name", "controller")
# controller-runtime's prometheus.ExponentialBuckets(10e-9, 10, 12): 10 ns … 1000 s.
_BUCKETS = tuple(float(f"1e{exponent}") for exponent in range(-8, 4))

_HELP = {
    "depth": "Current depth of workqueue",
    "adds": "Total number of adds handled by workqueue",
    "queue_duration": "How long in seconds an item stays in workqueue before being requested",
    "work_duration": "How long in seconds processing an item from workqueue takes.",
    "unfinished": "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by "
    "observing the rate at which this increases.",
    "longest_running": "How many seconds has the longest running processor for workqueue been running.",
    "retries": "Total number of items added to the workqueue with a non-zero delay "
    "(rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
}


class _Families(NamedTuple):
    depth: GaugeMetricFamily
    adds: CounterMetricFamily
    queue_duration: HistogramMetricFamily
    work_duration: HistogramMetricFamily
    unfinished: GaugeMetricFamily
    longest_running: GaugeMetricFamily
    retries: CounterMetricFamily


class _Histogram(Histogram):
    """A duration series of :class:`QueueMetrics`, updated on the event loop by the queue."""

    __slots__ = ()
    BOUNDS = _BUCKETS

    def observe(self, seconds: float) -> None:
        """``bisect_left(_BUCKETS, seconds)``, unrolled into four float comparisons (a third of
        the call's cost; the queue observes twice per item)."""
        if seconds <= 1e-4:
            if seconds <= 1e-6:
                index = (0 if seconds <= 1e-8 else 1) if seconds <= 1e-7 else 2
            else:
                index = 3 if seconds <= 1e-5 else 4
        elif seconds <= 1e-1:
            index = (5 if seconds <= 1e-3 else 6) if seconds <= 1e-2 else 7
        elif seconds <= 1e1:
            index = 8 if seconds <= 1e0 else 9
        else:
            index = (10 if seconds <= 1e2 else 11) if seconds <= 1e3 else 12
        self.counts[index] += 1
        self.total += seconds


class _Series:
    """The values of one queue name, kept for the life of the process (like label children)."""

    __slots__ = ("adds", "queue_duration", "queues", "retries", "work_duration")

    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.queue_duration = _Histogram()
        self.work_duration = _Histogram()
        # The live queues of this name, for the scrape-time gauges.
        self.queues: weakref.WeakSet[QueueMetrics[Any]] = weakref.WeakSet()


class _Collector(Collector):
    """The seven ``workqueue_*`` families of every named queue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _series and each series' queues set
        self._series: dict[str, _Series] = {}

    def join(self, name: str, queue: QueueMetrics[Any]) -> _Series:
        """The series of ``name``, with ``queue`` counted among its live queues."""
        with self._lock:
            series = self._series.get(name)
            if series is None:
                series = self._series[name] = _Series()
            series.queues.add(queue)
            return series

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            named = [(name, series, list(series.queues)) for name, series in self._series.items()]
        families = self._families()
        for name, series, queues in named:
            labels = [name, name]
            families.depth.add_metric(labels, sum(queue.depth() for queue in queues))
            families.adds.add_metric(labels, series.adds)
            families.retries.add_metric(labels, series.retries)
            for family, histogram in (
                (families.queue_duration, series.queue_duration),
                (families.work_duration, series.work_duration),
            ):
                family.add_metric(labels, histogram.buckets(), histogram.total)
            running = [queue.running_seconds() for queue in queues]
            families.unfinished.add_metric(labels, sum(total for total, _ in running))
            families.longest_running.add_metric(labels, max((longest for _, longest in running), default=0.0))
        return list(families)

    @staticmethod
    def _families() -> _Families:
        return _Families(
            GaugeMetricFamily("workqueue_depth", _HELP["depth"], labels=_LABELS),
            CounterMetricFamily("workqueue_adds", _HELP["adds"], labels=_LABELS),
            HistogramMetricFamily(
                "workqueue_queue_duration_seconds", _HELP["queue_duration"], labels=_LABELS
            ),
            HistogramMetricFamily("workqueue_work_duration_seconds", _HELP["work_duration"], labels=_LABELS),
            GaugeMetricFamily("workqueue_unfinished_work_seconds", _HELP["unfinished"], labels=_LABELS),
            GaugeMetricFamily(
                "workqueue_longest_running_processor_seconds", _HELP["longest_running"], labels=_LABELS
            ),
            CounterMetricFamily("workqueue_retries", _HELP["retries"], labels=_LABELS),
        )


_collector: _Collector | None = None
_collector_lock = threading.Lock()


def _get_collector() -> _Collector:
    global _collector  # noqa: PLW0603 - created and registered once per process, on first use
    with _collector_lock:
        if _collector is None:
            collector = _Collector()
            registry.register(collector)
            _collector = collector
        return _collector


class QueueMetrics(Generic[T]):
    """The metrics of one named queue: its clock, the series it updates, what scrapes read of it.

    The queue updates ``series`` itself, from the event loop thread, and keeps the timestamps
    (ready times in its dirty set, start times in ``processing``): a named queue makes no hash
    lookup more than an unnamed one.
    """

    __slots__ = ("__weakref__", "_dirty", "_processing", "now", "series")

    def __init__(self, name: str, clock: Clock, dirty: Sized, processing: Mapping[T, float]) -> None:
        #: The clock's ``now`` (RealClock: ``time.monotonic`` itself, saving a Python frame per call).
        self.now: Callable[[], float] = time.monotonic if isinstance(clock, RealClock) else clock.now
        # The queue's dirty items (queued, or added while processing), for the depth.
        self._dirty = dirty
        # The queue's processing items -> when each was handed out (read by scrapes).
        self._processing = processing
        #: The values of this queue's name; the queue updates them in its hot paths.
        self.series = _get_collector().join(name, self)

    def retry(self) -> None:
        """An item was added with a positive delay."""
        self.series.retries += 1

    def depth(self) -> int:
        """Items added and not yet handed out: the queue's dirty set (its size is read atomically)."""
        return len(self._dirty)

    def running_seconds(self) -> tuple[float, float]:
        """Seconds spent so far on the items being processed: (total, longest). Scrape-thread safe."""
        starts = list(self._processing.values())  # one C-level copy
        if not starts:
            return 0.0, 0.0
        now = self.now()
        return len(starts) * now - sum(starts), now - min(starts)
