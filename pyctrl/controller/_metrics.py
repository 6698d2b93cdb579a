"""controller-runtime's controller metrics (``pkg/internal/controller/metrics``).

Names, labels, help texts and the reconcile-time buckets are exactly controller-runtime's:

- ``controller_runtime_reconcile_total{controller, result}`` (result: success, error, requeue,
  requeue_after; all four exposed from the start, at 0);
- ``controller_runtime_reconcile_errors_total``, ``controller_runtime_terminal_reconcile_errors_total``,
  ``controller_runtime_reconcile_panics_total``, ``controller_runtime_reconcile_timeouts_total``
  ``{controller}``;
- ``controller_runtime_reconcile_time_seconds{controller}`` (histogram);
- ``controller_runtime_max_concurrent_reconciles`` and ``controller_runtime_active_workers``
  ``{controller}`` (gauges).

Guarantees:

- One collector per process, registered on :data:`pyctrl.metrics.registry` when the first
  controller is built, exposes all eight families; controllers sharing a name share their series
  (as they would share label children).
- Updating a value is a plain integer (or float) operation on the event loop: the reconcile loop
  pays no lock and no ``prometheus_client`` call per reconcile. (``prometheus_client``'s
  ``inc``/``observe`` take a lock and cost 5,000 to 9,000 instructions each; four of them ran per
  reconcile.) Scrapes, possibly on another thread, only read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from pyctrl._histogram import Histogram
from pyctrl.metrics import once, registry

__all__ = ["RESULTS", "ControllerMetrics"]

#: The ``result`` label values of ``controller_runtime_reconcile_total``.
RESULTS = ("success", "error", "requeue", "requeue_after")
_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip
_COUNTERS = ("errors", "terminal", "panics", "timeouts")
_NAMES = {
    "total": ("controller_runtime_reconcile_total", "Total number of reconciliations per controller"),
    "errors": (
        "controller_runtime_reconcile_errors_total",
        "Total number of reconciliation errors per controller",
    ),
    "terminal": (
        "controller_runtime_terminal_reconcile_errors_total",
        "Total number of terminal reconciliation errors per controller",
    ),
    "panics": (
        "controller_runtime_reconcile_panics_total",
        "Total number of reconciliation panics per controller",
    ),
    "timeouts": (
        "controller_runtime_reconcile_timeouts_total",
        "Total number of reconciliation timeouts per controller",
    ),
    "time": ("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller"),
    "max_concurrent": (
        "controller_runtime_max_concurrent_reconciles",
        "Maximum number of concurrent reconciles per controller",
    ),
    "active": ("controller_runtime_active_workers", "Number of currently used workers per controller"),
}


class ControllerMetrics:
    """The values of one controller name, updated in place by the controller (event loop only)."""

    __slots__ = ("active", "errors", "max_concurrent", "panics", "results", "terminal", "time", "timeouts")

    def __init__(self) -> None:
        self.results = dict.fromkeys(RESULTS, 0)  # result -> reconciles
        self.errors = 0
        self.terminal = 0
        self.panics = 0
        self.timeouts = 0
        self.max_concurrent = 0
        self.active = 0
        #: reconcile-time histogram: counts per bucket (last: above every bound) and the sum
        self.time = _ReconcileTime()

    @classmethod
    def of(cls, controller: str) -> ControllerMetrics:
        """The series of ``controller`` (registering the process's collector on first use)."""
        return _collector().series(controller)


class _ReconcileTime(Histogram):
    __slots__ = ()
    BOUNDS = _BUCKETS


class _Collector(Collector):
    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _series
        self._series: dict[str, ControllerMetrics] = {}

    def series(self, controller: str) -> ControllerMetrics:
        with self._lock:
            found = self._series.get(controller)
            if found is None:
                found = self._series[controller] = ControllerMetrics()
            return found

    def describe(self) -> Iterable[Metric]:
        return self._families([])

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            named = list(self._series.items())
        return self._families(named)

    @staticmethod
    def _families(named: list[tuple[str, ControllerMetrics]]) -> list[Metric]:
        c = ["controller"]
        total = CounterMetricFamily(*_NAMES["total"], labels=["controller", "result"])
        counters = {key: CounterMetricFamily(*_NAMES[key], labels=c) for key in _COUNTERS}
        time = HistogramMetricFamily(*_NAMES["time"], labels=c)
        gauges = {key: GaugeMetricFamily(*_NAMES[key], labels=c) for key in ("max_concurrent", "active")}
        for name, m in named:
            for result, count in list(m.results.items()):
                total.add_metric([name, result], count)
            for key, family in counters.items():
                family.add_metric([name], getattr(m, key))
            time.add_metric([name], m.time.buckets(), m.time.total)
            for key, gauge in gauges.items():
                gauge.add_metric([name], getattr(m, key))
        return [total, *counters.values(), time, *gauges.values()]


@once
def _collector() -> _Collector:
    collector = _Collector()
    registry.register(collector)
    return collector
