"""Fake-client specifics the shared behavioural suite does not cover."""

from __future__ import annotations

import asyncio

import pytest

from pyctrl.client import ConfigMap, FieldNotIndexed, Gone, Namespace, ObjectMeta
from pyctrl.client.fake import FakeClient


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns", labels=labels), data=data or None)


async def test_objects_passed_to_the_constructor_are_stored() -> None:
    client = FakeClient(cm("seed", v="1"), Namespace(metadata=ObjectMeta(name="ns")))
    assert (await client.get(ConfigMap, "seed", namespace="ns")).data == {"v": "1"}
    assert (await client.get(Namespace, "ns")).metadata.uid


async def test_generate_name_gets_a_random_suffix() -> None:
    client = FakeClient()
    obj = ConfigMap(metadata=ObjectMeta(generate_name="gen-", namespace="ns"))
    first, second = await client.create(obj), await client.create(obj)
    assert first.name.startswith("gen-")
    assert first.name != second.name


async def test_field_selectors_need_an_index_like_the_cache() -> None:
    client = FakeClient(cm("a", v="1"), cm("b", v="2"))
    with pytest.raises(FieldNotIndexed):
        await client.list(ConfigMap, namespace="ns", fields={"data.v": "2"})
    client.index_field(ConfigMap, "data.v", lambda c: [(c.data or {}).get("v", "")])
    assert [c.name for c in await client.list(ConfigMap, namespace="ns", fields={"data.v": "2"})] == ["b"]


async def test_a_watch_replays_history_after_its_resource_version() -> None:
    client = FakeClient()
    start = (await client.list(ConfigMap, namespace="ns")).resource_version
    created = await client.create(cm("w", v="1"))
    await client.delete(created)
    seen = []
    async with asyncio.timeout(5):
        async for event in client.watch(ConfigMap, namespace="ns", resource_version=start):
            seen.append((event.type, event.object.name))
            if event.type == "DELETED":
                break
    assert seen == [("ADDED", "w"), ("DELETED", "w")]


async def test_a_watch_from_a_resource_version_older_than_the_history_raises_gone() -> None:
    client = FakeClient()
    obj = await client.create(cm("busy", v="0"))
    for i in range(10_001):
        obj.data = {"v": str(i + 1)}
        obj = await client.update(obj)
    with pytest.raises(Gone):
        async for _ in client.watch(ConfigMap, namespace="ns", resource_version="1"):
            pass


async def test_a_label_filtered_watch_reports_an_object_leaving_the_selector_as_deleted() -> None:
    client = FakeClient()
    start = (await client.list(ConfigMap, namespace="ns")).resource_version
    obj = await client.create(cm("x", {"keep": "yes"}))
    assert obj.metadata.labels is not None
    obj.metadata.labels = {"keep": "no"}
    await client.update(obj)
    seen = []
    async with asyncio.timeout(5):
        async for event in client.watch(
            ConfigMap, namespace="ns", labels={"keep": "yes"}, resource_version=start
        ):
            seen.append(event.type)
            if len(seen) == 2:
                break
    assert seen == ["ADDED", "DELETED"]
