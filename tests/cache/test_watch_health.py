"""Watch health on the real apiserver, through pyctrl.testing.FaultProxy: a frozen watch is
abandoned within the stall timeout and resumed from its last resourceVersion (no list), a healthy
one is re-opened once per timeout, and resets and delays lose or repeat no event."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pyctrl import ControllerBuilder, Manager, Request, Result
from pyctrl.cache import Backoff, Cache, HandlerFuncs, Informer
from pyctrl.client import (
    ApiClient,
    Config,
    ConfigMap,
    HTTPRequest,
    HTTPTransport,
    ListOptions,
    NotFound,
    ObjectMeta,
    PartialObjectMetadata,
    load_kubeconfig,
)
from pyctrl.client.rest import Transport
from pyctrl.metrics import registry
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


@dataclass(frozen=True)
class Sent:
    """One request as it left the client: when, and what."""

    at: float
    method: str
    path: str
    params: dict[str, Any]
    accept: str | None

    @property
    def watch(self) -> bool:
        return bool(self.params.get("watch"))

    @property
    def informer(self) -> str:
        """Which of a test's two informers sent it: ``metadata`` (PartialObjectMetadata) or ``typed``."""
        return "metadata" if "PartialObjectMetadata" in (self.accept or "") else "typed"


class RequestLog:
    """An HTTPTransport recording every request (reads and watches included) before sending it."""

    def __init__(self, inner: HTTPTransport) -> None:
        self.inner = inner
        self.sent: list[Sent] = []

    def _record(self, request: HTTPRequest) -> None:
        self.sent.append(
            Sent(time.monotonic(), request.method, request.path, dict(request.params or {}), request.accept)
        )

    async def send(self, request: HTTPRequest) -> bytes:
        self._record(request)
        return await self.inner.send(request)

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        self._record(request)
        return self.inner.stream(request)

    def on(self, path: str, since: int = 0) -> list[Sent]:
        return [s for s in self.sent[since:] if s.path == path]


def label_v_into(values: list[str]) -> Callable[[Any, Any], None]:
    """An update handler appending the new object's label ``v``."""

    def update(_old: Any, new: Any) -> None:
        values.append((new.metadata.labels or {}).get("v", ""))

    return update


async def label(client: ApiClient, namespace: str, v: str) -> None:
    """Set the label ``v`` of the ConfigMap ``watched``."""
    obj = await client.get(ConfigMap, "watched", namespace=namespace)
    obj.metadata.labels = {"v": v}
    await client.update(obj)


def restarts(kind: str, cause: str) -> float:
    return registry.get_sample_value("pyctrl_watch_restarts_total", {"kind": kind, "cause": cause}) or 0.0


@pytest.fixture
async def recorded(config: Config, proxy: FaultProxy) -> AsyncIterator[tuple[ApiClient, RequestLog]]:
    """A client through the proxy whose every request is logged."""
    proxied = config.with_options(host=proxy.url("https"))
    inner = Transport(proxied)
    log = RequestLog(inner)
    client = ApiClient(proxied, transport=log)
    try:
        yield client, log
    finally:
        await client.close()
        await inner.close()


async def test_with_every_connection_frozen_a_change_reaches_both_caches_in_the_stall_timeout_without_a_list(
    recorded: tuple[ApiClient, RequestLog], proxy: FaultProxy, direct: ApiClient, namespace: str
) -> None:
    client, log = recorded
    cache = Cache(client, default_namespaces=[namespace])  # the default stall timeout: 30 s
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    seen: dict[str, list[str]] = {"typed": [], "metadata": []}
    typed = (await cache.get_informer(ConfigMap)).informers[namespace]
    meta = (await cache.get_informer(PartialObjectMetadata.of(ConfigMap))).informers[namespace]
    for key, informer in (("typed", typed), ("metadata", meta)):
        informer.add_event_handler(HandlerFuncs(update=label_v_into(seen[key])))
    await direct.create(cm(namespace, "watched", "1"))
    async with cache:
        assert await cache.wait_for_cache_sync(60)

        def watching_after_the_list() -> bool:  # each informer is in a watch of its own, not its list
            watches = [s for s in log.on(path) if s.watch and not s.params.get("sendInitialEvents")]
            return {s.informer for s in watches} == {"typed", "metadata"}

        await eventually(watching_after_the_list, within=30, what="both informers watching")
        await label(direct, namespace, "1")  # delivered by both watches: they are connected and have
        await eventually(  # 20-25 s until they end, nothing in flight: the freeze catches both
            lambda: "1" in seen["typed"] and "1" in seen["metadata"], within=30, what="both watches flowing"
        )
        assert proxy.freeze() >= 2  # every open connection hangs, open: the two watches (and the pool)
        frozen_at, since = time.monotonic(), len(log.sent)
        resume_from = {"typed": typed.watcher.resource_version, "metadata": meta.watcher.resource_version}
        stalls = {"typed": restarts(typed.name, "stall"), "metadata": restarts(meta.name, "stall")}
        await label(direct, namespace, "2")
        await eventually(
            lambda: "2" in seen["typed"] and "2" in seen["metadata"],
            within=60,  # 30 s (the default stall timeout) at most, plus a generous margin
            what="the change made after the freeze, in both informers",
        )
        print(f"\nchange made after the freeze delivered {time.monotonic() - frozen_at:.1f} s after it")
        after = log.on(path, since)
        assert [s for s in after if not s.watch] == [], "a list was made after the freeze"
        assert not [s for s in after if s.params.get("sendInitialEvents")], (
            "a streaming list after the freeze"
        )
        for key, rv in resume_from.items():  # each resumed from where its frozen watch had got to
            first = next(s for s in after if s.informer == key)
            assert first.params.get("resourceVersion") == rv, (key, rv, first)
        assert restarts(typed.name, "stall") == stalls["typed"] + 1
        assert restarts(meta.name, "stall") == stalls["metadata"] + 1
    proxy.thaw()


async def test_a_healthy_idle_watch_is_reopened_once_per_timeout_from_its_last_version_without_a_list(
    recorded: tuple[ApiClient, RequestLog], namespace: str
) -> None:
    client, log = recorded
    cache = Cache(client, default_namespaces=[namespace], watch_stall_timeout=6)  # timeoutSeconds 3-4
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    informer = (await cache.get_informer(ConfigMap)).informers[namespace]
    async with cache:
        assert await cache.wait_for_cache_sync(60)
        started, since = time.monotonic(), len(log.sent)
        timeouts_before = restarts(informer.name, "timeout")
        await eventually(
            lambda: len([s for s in log.on(path, since) if s.watch]) >= 4, within=60, what="three re-watches"
        )
        ended = time.monotonic()
    watches = [s for s in log.on(path, since) if s.watch and s.at <= ended]
    assert [s for s in log.on(path, since) if not s.watch] == [], "a list was made by a healthy watch"
    assert all(not s.params.get("sendInitialEvents") for s in watches)
    shortest = min(int(s.params["timeoutSeconds"]) for s in watches)
    assert 3 <= shortest <= 4
    # once per timeout at most: the apiserver ends each watch after its timeoutSeconds, not sooner
    assert len(watches) <= (ended - started) / shortest + 1
    versions = [int(s.params["resourceVersion"]) for s in watches]
    assert versions == sorted(versions), "each watch resumes from where the previous one ended"
    assert restarts(informer.name, "timeout") >= timeouts_before + 2


async def test_a_change_made_during_a_freeze_of_the_watches_is_cached_and_reconciled(
    config: Config, proxy: FaultProxy, direct: ApiClient, namespace: str
) -> None:
    mgr = Manager(
        config.with_options(host=proxy.url("https")),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        cache_options={"default_namespaces": [namespace], "watch_stall_timeout": 6.0},
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
    informer = Informer(lw, ConfigMap, backoff=Backoff(initial=0.05, cap=0.5), watch_stall_timeout=6.0)
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
