"""The Prometheus registry shared by every pyctrl component.

Mirrors controller-runtime ``pkg/metrics``: one registry (``registry``) that the manager's metrics
server exposes, on which the workqueue, controller, leader-election and REST-client metrics are
registered. Users may register their own collectors on it too.
"""

import threading
from collections.abc import Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry

__all__ = ["once", "registry"]

T = TypeVar("T")

#: controller-runtime's ``metrics.Registry``.
registry = CollectorRegistry(auto_describe=True)


def once(factory: Callable[[], T]) -> Callable[[], T]:
    """``factory``'s result, made on the first call only (thread-safe): a component's metric
    families are registered once per process, and only when the component is used."""
    lock = threading.Lock()
    made: list[T] = []

    def get() -> T:
        with lock:
            if not made:
                made.append(factory())
            return made[0]

    return get
