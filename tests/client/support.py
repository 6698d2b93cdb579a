"""Shared test helpers: the test CRD's typed model, backends for the behavioural suite, polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pyctrl.client import GroupVersionKind, KubeModel, KubeObject, NotFound, StaticRESTMapper
from pyctrl.client.fake import FakeClient
from pyctrl.client.interfaces import Client

WIDGET_CRD = Path(__file__).with_name("widgets-crd.yaml")
R = TypeVar("R")


class WidgetSpec(KubeModel):
    replicas: int | None = None
    color: str | None = None
    size: int | None = None
    tags: list[str] | None = None


class WidgetStatus(KubeModel):
    replicas: int | None = None
    phase: str | None = None


class Widget(KubeObject):
    gvk = GroupVersionKind("test.pyctrl.io", "v1", "Widget")
    spec: WidgetSpec | None = None
    status: WidgetStatus | None = None


def fake_client() -> FakeClient:
    mapper = StaticRESTMapper()
    mapper.add(Widget.gvk, "widgets", namespaced=True)
    return FakeClient(status_subresource=[Widget], mapper=mapper)


@dataclass
class Backend:
    """One implementation under test: the client and a namespace to work in."""

    name: str
    client: Client
    namespace: str


async def eventually(check: Callable[[], Awaitable[R]], *, within: float = 20.0, interval: float = 0.05) -> R:
    """Poll ``check`` until it returns without AssertionError or NotFound (not there *yet*);
    re-raise the last failure at the deadline."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await check()
        except (AssertionError, NotFound):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)
