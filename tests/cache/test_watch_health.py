"""Watch health on the real apiserver, through pyctrl.testing.FaultProxy: a frozen watch is
abandoned and resumed, and resets and delays lose or repeat no event."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pyctrl import ControllerBuilder, Manager, Request, Result
from pyctrl.cache import Backoff, HandlerFuncs, Informer
from pyctrl.client import ApiClient, Config, ConfigMap, ListOptions, NotFound, ObjectMeta, load_kubeconfig
from pyctrl.testing import FaultProxy, eventually

pytestmark = pytest.mark.controlplane


@pytest.fixture
async def config(kubeconfig: Path) -> Config:
    return await load_kubeconfig(kubeconfig)


@pytest.fixture
async def proxy(config: Config) -> AsyncIterator[FaultProxy]:
    server = urlsplit(config.host)
    assert server.hostname
    assert server.port
    async with FaultProxy(server.hostname, server.port) as p:
        yield p


@pytest.fixture
async def direct(config: Config) -> AsyncIterator[ApiClient]:
    """Writes made by the test: straight to the apiserver, never through the faults."""
    async with ApiClient(config) as client:
        yield client


def cm(namespace: str, name: str, v: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace), data={"v": v})


async def test_a_change_made_during_a_freeze_of_the_watches_is_cached_and_reconciled(
    config: Config, proxy: FaultProxy, direct: ApiClient, namespace: str
) -> None:
    mgr = Manager(
        config.with_options(host=proxy.url("https")),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_options={"default_namespaces": [namespace], "watch_idle_timeout": 5.0},
    )
    reconciled: dict[str, str | None] = {}

    class Reconciler:
        async def reconcile(self, request: Request) -> Result:
            try:
                obj = await mgr.client.get(ConfigMap, request.name, namespace=request.namespace)
            except NotFound:
                return Result()
            reconciled[request.name] = (obj.data or {}).get("v")
            return Result()

    ControllerBuilder(mgr).for_(ConfigMap).complete(Reconciler())
    await direct.create(cm(namespace, "watched", "1"))
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.start(stop))
    try:
        await eventually(lambda: reconciled.get("watched") == "1", within=60, what="the first reconcile")
        assert proxy.freeze() >= 1  # the ConfigMap watch (and any pooled connection) hangs, open
        frozen_at = time.monotonic()
        changed = await direct.get(ConfigMap, "watched", namespace=namespace)
        changed.data = {"v": "2"}
        await direct.update(changed)
        await eventually(
            lambda: reconciled.get("watched") == "2", within=120, what="the reconcile of the change"
        )
        cached = await mgr.client.get(ConfigMap, "watched", namespace=namespace)
        assert (cached.data or {}).get("v") == "2"
        print(f"\nchange made during the freeze reconciled {time.monotonic() - frozen_at:.1f} s after it")
    finally:
        proxy.thaw()
        stop.set()
        await asyncio.wait_for(task, 60)


async def test_after_resets_and_delays_the_cache_converges_with_no_lost_or_repeated_event(
    config: Config, proxy: FaultProxy, direct: ApiClient, namespace: str
) -> None:
    proxied = ApiClient(config.with_options(host=proxy.url("https")))
    lw = await proxied.list_watcher(ConfigMap, ListOptions.build(namespace=namespace))
    informer = Informer(lw, ConfigMap, backoff=Backoff(initial=0.05, cap=0.5), watch_idle_timeout=5.0)
    seen: list[tuple[str, str, str]] = []  # (type, name, resourceVersion) as handlers saw them

    def record(kind: str, obj: Any) -> None:
        if obj.name.startswith("cm-"):  # not the namespace's kube-root-ca.crt
            seen.append((kind, obj.name, obj.metadata.resource_version))

    informer.add_event_handler(
        HandlerFuncs(
            add=lambda o, _initial: record("add", o),
            update=lambda _old, new: record("update", new),
            delete=lambda o: record("delete", o),
        )
    )
    written: list[tuple[str, str, str]] = []
    try:
        async with informer:
            assert await informer.wait_for_sync(60)
            for i in range(24):
                match i % 6:
                    case 0:
                        proxy.reset()
                    case 2:
                        proxy.set_delay(0.05)
                    case 4:
                        proxy.set_delay(0)
                name = f"cm-{i % 4}"
                try:
                    current = await direct.get(ConfigMap, name, namespace=namespace)
                except NotFound:
                    created = await direct.create(cm(namespace, name, str(i)))
                    written.append(("add", name, created.metadata.resource_version or ""))
                    continue
                if i % 7 == 6:
                    await direct.delete(current)
                    written.append(("delete", name, ""))
                    continue
                current.data = {"v": str(i)}
                updated = await direct.update(current)
                written.append(("update", name, updated.metadata.resource_version or ""))
            proxy.set_delay(0)
            truth = {
                o.name: o.metadata.resource_version for o in await direct.list(ConfigMap, namespace=namespace)
            }

            def converged() -> bool:
                objs = [informer.decode(data) for data in informer.store.list()]
                stored = {o.name: o.metadata.resource_version for o in objs}
                return stored == truth

            await eventually(converged, within=60, what="the cache to equal the apiserver's list")
            await eventually(
                lambda: len(seen) >= len(written), within=30, what="the handler to see every change"
            )
    finally:
        await proxied.close()
    repeated = [e for e, n in Counter(e for e in seen if e[0] != "delete").items() if n > 1]
    assert not repeated, f"events delivered twice: {repeated}"
    assert [e for e in seen if e[0] != "delete"] == [e for e in written if e[0] != "delete"]
    assert [(t, n) for t, n, _ in seen if t == "delete"] == [(t, n) for t, n, _ in written if t == "delete"]
    assert proxy.accepted > 1  # the resets really forced new connections
