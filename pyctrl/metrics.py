"""The Prometheus registry shared by every pyctrl component.

Mirrors controller-runtime ``pkg/metrics``: one registry (``registry``) that the manager's metrics
server exposes, on which the workqueue, controller, leader-election and REST-client metrics are
registered. Users may register their own collectors on it too.
"""

from prometheus_client import CollectorRegistry

__all__ = ["registry"]

#: controller-runtime's ``metrics.Registry``.
registry = CollectorRegistry(auto_describe=True)
