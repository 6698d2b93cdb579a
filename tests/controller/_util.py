"""Helpers for the controller tests: polling with a deadline (never sleeping), a Widget type,
a rate limiter that records its delays, metric reads."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from pydantic import Field

from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import KubeModel, KubeObject, ObjectMeta
from pyctrl.metrics import registry
from pyctrl.workqueue import RateLimiter

WIDGET_GVK = GroupVersionKind("test.pyctrl.dev", "v1", "Widget")


class WidgetSpec(KubeModel):
    size: int = 1


class Widget(KubeObject):
    """The test CRD of tests/envtest/testdata/widgets.yaml (status subresource, spec.size 1..5)."""

    gvk = WIDGET_GVK
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: dict[str, Any] | None = None


def widget(namespace: str, name: str, size: int = 1, **labels: str) -> Widget:
    return Widget(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None), spec=WidgetSpec(size=size)
    )


def metric(name: str, **labels: str) -> float:
    """Current value of a sample on pyctrl's registry (0 when absent)."""
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


class RecordingLimiter:
    """Wraps a rate limiter and records every delay it hands out, per item."""

    def __init__(self, inner: RateLimiter[Any]) -> None:
        self.inner = inner
        self.delays: dict[Hashable, list[float]] = {}

    def when(self, item: Hashable) -> float:
        delay = self.inner.when(item)
        self.delays.setdefault(item, []).append(delay)
        return delay

    def forget(self, item: Hashable) -> None:
        self.inner.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.inner.num_requeues(item)


async def let_tasks_run(rounds: int = 50) -> None:
    """Give every ready task turns of the loop (to show something does *not* happen)."""
    for _ in range(rounds):
        await asyncio.sleep(0)  # yield one loop turn: no wall-clock wait, so no deadline needed
