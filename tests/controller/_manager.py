"""Running a real Manager against the envtest apiserver, and the sample Widget reconciler."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from pyctrl.client import load_kubeconfig
from pyctrl.client.errors import CacheNotStarted, NotFound
from pyctrl.manager import Manager
from pyctrl.reconcile import Request, Result

from ._util import Widget


async def new_manager(kubeconfig: Path, namespace: str, **options: Any) -> Manager:
    config = await load_kubeconfig(kubeconfig)
    defaults: dict[str, Any] = {
        "metrics_bind_address": "127.0.0.1:0",
        "health_probe_bind_address": "127.0.0.1:0",
        "cache_options": {"default_namespaces": [namespace]},
    }
    return Manager(config, **(defaults | options))


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> AsyncIterator[asyncio.Task[None]]:
    """Start ``mgr``; on exit stop it and wait for it (its failure, if any, is raised)."""
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.start(stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


def desired_status(w: Widget) -> dict[str, Any]:
    return {"observedGeneration": w.metadata.generation, "size": w.spec.size, "phase": "Ready"}


class WidgetReconciler:
    """The sample controller: reads the Widget from the cache and writes its status when it differs.

    ``hooks[name]`` may raise instead (to test error handling).
    """

    def __init__(self, client: Any, hooks: dict[str, Callable[[], None]] | None = None) -> None:
        self.client = client
        self.hooks = hooks or {}
        self.calls: Counter[str] = Counter()

    async def reconcile(self, request: Request) -> Result:
        self.calls[request.name] += 1
        if request.name in self.hooks:
            self.hooks[request.name]()
        try:
            w = await self.client.get(Widget, request.name, namespace=request.namespace)
        except NotFound:
            return Result()
        if w.status != desired_status(w):
            w.status = desired_status(w)
            await self.client.status().update(w)
        return Result()


async def is_ready(reader: Any, namespace: str, name: str) -> bool:
    try:
        w = await reader.get(Widget, name, namespace=namespace)
    except (NotFound, CacheNotStarted):
        return False
    return bool(w.status == desired_status(w))
