"""The apiserver client against the real control plane: errors, watch, metrics, limits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from pyctrl.client import (
    ApiClient,
    ConfigMap,
    Forbidden,
    Gone,
    GroupVersionKind,
    Invalid,
    ObjectMeta,
    Unauthorized,
    UnknownKind,
    load_kubeconfig,
)
from pyctrl.client.config import Config, _StaticCredentials
from pyctrl.client.rest import requests_total
from pyctrl.envtest import Environment
from tests.client.conftest import RestartApiserver
from tests.client.support import Widget, WidgetSpec

pytestmark = pytest.mark.controlplane


async def test_an_unknown_kind_raises_unknown_kind_naming_what_is_served(
    api: ApiClient, namespace: str
) -> None:
    with pytest.raises(UnknownKind, match=r"Gizmo.*ConfigMap"):
        await api.get(GroupVersionKind("", "v1", "Gizmo"), "x", namespace=namespace)
    with pytest.raises(UnknownKind, match=r"does not serve nothing\.example\.com/v1"):
        await api.list(GroupVersionKind("nothing.example.com", "v1", "Thing"), namespace=namespace)


async def test_a_kind_added_after_its_group_version_was_cached_is_found_by_refreshing_discovery(
    api: ApiClient, envtest: Environment
) -> None:
    gadget = GroupVersionKind("test.pyctrl.io", "v1", "Gadget")
    await api.mapping(Widget)  # caches test.pyctrl.io/v1 without Gadget
    if not any(m.kind == "Gadget" for m in await _served(api)):
        await asyncio.to_thread(envtest.install_crds, [Path(__file__).with_name("gadgets-crd.yaml")])
    mapping = await api.mapping(gadget)
    assert mapping.resource.resource == "gadgets"
    assert mapping.namespaced is False
    body: dict[str, Any] = {"apiVersion": "test.pyctrl.io/v1", "kind": "Gadget", "metadata": {"name": "g1"}}
    created = await api.create(body)
    try:
        assert (await api.get(gadget, "g1"))["metadata"]["uid"] == created["metadata"]["uid"]
    finally:
        await api.delete(created)


async def _served(api: ApiClient) -> list[GroupVersionKind]:
    doc = orjson.loads(await api.rest.request("GET", "/apis/test.pyctrl.io/v1"))
    return [GroupVersionKind("test.pyctrl.io", "v1", r["kind"]) for r in doc["resources"]]


async def test_schema_violations_raise_invalid_with_field_causes(api: ApiClient, namespace: str) -> None:
    bad = Widget(metadata=ObjectMeta(name="bad", namespace=namespace), spec=WidgetSpec(replicas=-1))
    with pytest.raises(Invalid) as info:
        await api.create(bad)
    assert any(c.field == "spec.replicas" for c in info.value.causes)


async def test_a_bad_token_raises_unauthorized(envtest: Environment) -> None:
    cfg = Config(host=envtest.server_url, verify_ssl=False, credentials=_StaticCredentials("Bearer nonsense"))
    async with ApiClient(cfg) as client:
        with pytest.raises(Unauthorized):
            await client.get(ConfigMap, "x", namespace="default")


async def test_a_user_without_rbac_permission_raises_forbidden(envtest: Environment, namespace: str) -> None:
    kubeconfig = envtest.add_user("nobody")
    async with ApiClient(await load_kubeconfig(kubeconfig)) as client:
        with pytest.raises(Forbidden, match="nobody"):
            await client.list(ConfigMap, namespace=namespace)


async def test_watch_streams_changes_in_order_from_a_resource_version(api: ApiClient, namespace: str) -> None:
    start = await api.list(ConfigMap, namespace=namespace)
    created = await api.create(ConfigMap(metadata=ObjectMeta(name="w", namespace=namespace), data={"v": "1"}))
    created.data = {"v": "2"}
    await api.update(created)
    await api.delete(created)
    seen: list[tuple[str, str]] = []
    async with asyncio.timeout(20):
        async for event in api.watch(ConfigMap, namespace=namespace, resource_version=start.resource_version):
            if event.type == "BOOKMARK":
                continue
            seen.append((event.type, (event.object.data or {}).get("v", "")))
            if event.type == "DELETED":
                break
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


async def test_a_watch_from_a_resource_version_the_apiserver_no_longer_has_raises_gone(
    api: ApiClient, namespace: str, restart_apiserver: RestartApiserver
) -> None:
    old = (await api.list(ConfigMap, namespace=namespace)).resource_version
    await api.create(ConfigMap(metadata=ObjectMeta(name="g", namespace=namespace)))
    # etcd compaction alone is not enough: the apiserver's watch cache still serves old
    # resourceVersions from memory. A restart empties it, and compaction removes the history.
    await restart_apiserver(compact=True)

    async def drain() -> None:
        async with asyncio.timeout(30):
            async for _ in api.watch(ConfigMap, namespace=namespace, resource_version=old):
                pass

    with pytest.raises(Gone):
        await drain()


async def test_requests_are_counted_by_code_method_and_host(api: ApiClient, namespace: str) -> None:
    host = api.rest.host
    before_ok = requests_total.labels(code="200", method="GET", host=host)._value.get()
    before_missing = requests_total.labels(code="404", method="GET", host=host)._value.get()
    await api.list(ConfigMap, namespace=namespace)
    with pytest.raises(Exception, match="not found"):
        await api.get(ConfigMap, "missing", namespace=namespace)
    assert requests_total.labels(code="200", method="GET", host=host)._value.get() >= before_ok + 1
    assert requests_total.labels(code="404", method="GET", host=host)._value.get() == before_missing + 1


async def test_the_client_side_rate_limiter_still_serves_every_request(
    kubeconfig: Path, namespace: str
) -> None:
    cfg = (await load_kubeconfig(kubeconfig)).with_options(qps=50.0, burst=5)
    async with ApiClient(cfg) as client:
        results = await asyncio.gather(*(client.list(ConfigMap, namespace=namespace) for _ in range(20)))
    assert len(results) == 20
