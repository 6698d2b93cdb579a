"""controller-runtime's controller metrics (``pkg/internal/controller/metrics``).

Families are created once per process on ``pyctrl.metrics.registry``; each controller resolves
its label children once. Names and labels are exactly controller-runtime's.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from pyctrl.metrics import once, registry

__all__ = ["ControllerMetrics"]

_RESULTS = ("success", "error", "requeue", "requeue_after")
_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip


@dataclass(frozen=True)
class _Families:
    total: Counter
    errors: Counter
    terminal: Counter
    panics: Counter
    timeouts: Counter
    time: Histogram
    max_concurrent: Gauge
    active: Gauge


@once
def _get() -> _Families:
    c = ("controller",)
    return _Families(
        total=Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=registry,
        ),
        errors=Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            c,
            registry=registry,
        ),
        terminal=Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            c,
            registry=registry,
        ),
        panics=Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
            c,
            registry=registry,
        ),
        timeouts=Counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller",
            c,
            registry=registry,
        ),
        time=Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            c,
            buckets=_BUCKETS,
            registry=registry,
        ),
        max_concurrent=Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            c,
            registry=registry,
        ),
        active=Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            c,
            registry=registry,
        ),
    )


class ControllerMetrics:
    """The label children of one controller."""

    def __init__(self, controller: str) -> None:
        f = _get()
        self.total = {r: f.total.labels(controller, r) for r in _RESULTS}
        self.errors = f.errors.labels(controller)
        self.terminal = f.terminal.labels(controller)
        self.panics = f.panics.labels(controller)
        self.timeouts = f.timeouts.labels(controller)
        self.time = f.time.labels(controller)
        self.max_concurrent = f.max_concurrent.labels(controller)
        self.active = f.active.labels(controller)
        for child in self.total.values():
            child.inc(0)
