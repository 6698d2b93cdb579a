"""pyctrl.cache.Cache and the split client, against the fake client and the real apiserver."""

from __future__ import annotations

import contextlib
from typing import Any, cast

import pytest

from pyctrl.cache import ByObject, Cache, CacheError, CacheNotStarted, FieldNotIndexed, ListWatchSource
from pyctrl.client import (
    AlreadyExists,
    ApiClient,
    ConfigMap,
    GroupVersionKind,
    Namespace,
    NotFound,
    ObjectList,
    ObjectMeta,
    UnknownKind,
)
from pyctrl.client.split import SplitClient
from tests.client.support import Backend, Widget, WidgetSpec, eventually


def cm(ns: str, name: str, labels: dict[str, str] | None = None, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=ns, labels=labels), data=data or None)


def cache_of(backend: Backend, **options: Any) -> Cache:
    return Cache(cast(ListWatchSource, backend.client), **options)


async def test_reads_before_start_raise_cache_not_started(backend: Backend) -> None:
    cache = cache_of(backend)
    with pytest.raises(CacheNotStarted):
        await cache.get(ConfigMap, "x", namespace=backend.namespace)
    with pytest.raises(CacheNotStarted):
        await cache.wait_for_cache_sync(1)


async def test_the_first_read_starts_the_kinds_informer_and_answers_from_memory(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "a", {"app": "x"}, v="1"))
    async with cache_of(backend) as cache:
        got = await cache.get(ConfigMap, "a", namespace=ns)
        assert got.data == {"v": "1"}
        await backend.client.create(cm(ns, "b", {"app": "y"}, v="2"))

        async def listed() -> None:
            assert [c.name for c in await cache.list(ConfigMap, namespace=ns, labels={"app": "y"})] == ["b"]

        await eventually(listed)
        with pytest.raises(NotFound):
            await cache.get(ConfigMap, "nope", namespace=ns)
        assert await cache.wait_for_cache_sync(10)


async def test_a_caller_mutating_what_it_read_never_changes_the_cache(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "m", v="1"))
    async with cache_of(backend) as cache:
        first = await cache.get(ConfigMap, "m", namespace=ns)
        assert first.data is not None
        first.data["v"] = "mutated"
        (await cache.list(ConfigMap, namespace=ns)).items[0].metadata.name = "renamed"
        again = await cache.get(ConfigMap, "m", namespace=ns)
        assert again.data == {"v": "1"}


async def test_typed_and_unstructured_reads_share_one_informer(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "u", v="1"))
    async with cache_of(backend) as cache:
        typed = await cache.get(ConfigMap, "u", namespace=ns)
        raw = await cache.get(GroupVersionKind("", "v1", "ConfigMap"), "u", namespace=ns)
        assert raw["kind"] == "ConfigMap"
        assert raw["data"] == typed.data
        assert len(cache._kinds) == 1


async def test_index_field_serves_field_selectors_and_unindexed_fields_are_refused(backend: Backend) -> None:
    ns = backend.namespace
    for name, color in (("w1", "red"), ("w2", "blue"), ("w3", "red")):
        await backend.client.create(
            Widget(metadata=ObjectMeta(name=name, namespace=ns), spec=WidgetSpec(color=color))
        )
    async with cache_of(backend) as cache:
        await cache.index_field(
            Widget, "spec.color", lambda w: [w.spec.color] if w.spec and w.spec.color else []
        )
        red = await cache.list(Widget, namespace=ns, fields={"spec.color": "red"})
        assert [w.name for w in red] == ["w1", "w3"]
        assert [w.name for w in await cache.list(Widget, fields={"metadata.name": "w2"})] == ["w2"]
        with pytest.raises(FieldNotIndexed, match=r"spec\.size"):
            await cache.list(Widget, namespace=ns, fields={"spec.size": "1"})


async def test_per_kind_namespaces_restrict_what_is_cached(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "here"))
    async with cache_of(backend, by_object={ConfigMap: ByObject(namespaces=[ns])}) as cache:
        everything = await cache.list(ConfigMap)
        assert "here" in [c.name for c in everything]
        assert {c.namespace for c in everything} == {ns}
        with pytest.raises(CacheError, match="not cached"):
            await cache.get(ConfigMap, "kube-root-ca.crt", namespace="kube-system")


async def test_repeated_reads_of_a_kind_answer_as_the_first_read_did(backend: Backend) -> None:
    """A kind read once is then read through a shortcut (its informer and decoder remembered):
    every answer and every refusal of the first read stays the same."""
    ns = backend.namespace
    await backend.client.create(cm(ns, "a", v="1"))
    cache = cache_of(backend, by_object={ConfigMap: ByObject(namespaces=[ns])})
    await cache.start()
    try:
        for _ in range(2):
            assert (await cache.get(ConfigMap, "a", namespace=ns)).data == {"v": "1"}
            with pytest.raises(NotFound):
                await cache.get(ConfigMap, "nope", namespace=ns)
            with pytest.raises(CacheError, match="not cached"):
                await cache.get(ConfigMap, "a", namespace="kube-system")
            with pytest.raises(ValueError, match="namespace is required"):
                await cache.get(ConfigMap, "a")
        current = await backend.client.get(ConfigMap, "a", namespace=ns)
        current.data = {"v": "2"}
        await backend.client.update(current)

        async def updated() -> None:
            assert (await cache.get(ConfigMap, "a", namespace=ns)).data == {"v": "2"}

        await eventually(updated)
        await backend.client.delete(current)

        async def deleted() -> bool:
            try:
                await cache.get(ConfigMap, "a", namespace=ns)
            except NotFound:
                return True
            raise AssertionError("still cached")

        assert await eventually(deleted)
    finally:
        await cache.stop()
    with pytest.raises(CacheNotStarted):
        await cache.get(ConfigMap, "a", namespace=ns)


async def test_per_kind_label_selectors_restrict_what_is_cached(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "mine", {"owner": "me"}))
    await backend.client.create(cm(ns, "theirs", {"owner": "them"}))
    async with cache_of(backend, by_object={ConfigMap: ByObject(labels={"owner": "me"})}) as cache:
        assert [c.name for c in await cache.list(ConfigMap, namespace=ns)] == ["mine"]


async def test_a_per_kind_transform_rewrites_cached_objects(backend: Backend) -> None:
    ns = backend.namespace
    await backend.client.create(cm(ns, "big", payload="x" * 1000, keep="yes"))

    def drop_payload(obj: dict[str, Any]) -> dict[str, Any]:
        obj.get("data", {}).pop("payload", None)
        return obj

    async with cache_of(backend, by_object={ConfigMap: ByObject(transform=drop_payload)}) as cache:
        got = await cache.get(ConfigMap, "big", namespace=ns)
        assert got.data == {"keep": "yes"}


@pytest.mark.controlplane
async def test_the_default_transform_strips_managed_fields(api: ApiClient, namespace: str) -> None:
    await api.create(cm(namespace, "mf", v="1"))
    assert (await api.get(ConfigMap, "mf", namespace=namespace)).metadata.managed_fields
    async with Cache(api) as cache:
        assert (await cache.get(ConfigMap, "mf", namespace=namespace)).metadata.managed_fields is None


@pytest.mark.controlplane
async def test_an_unknown_kind_fails_at_once(api: ApiClient) -> None:
    async with Cache(api) as cache:
        with pytest.raises(UnknownKind):
            await cache.get(GroupVersionKind("nothing.example.com", "v1", "Thing"), "x", namespace="default")


async def test_the_split_client_reads_from_the_cache_and_writes_to_the_apiserver(backend: Backend) -> None:
    ns = backend.namespace
    async with cache_of(backend) as cache:
        client = SplitClient(cache, backend.client)
        created = await client.create(cm(ns, "s", v="1"))
        assert (await client.api_reader.get(ConfigMap, "s", namespace=ns)).data == {"v": "1"}

        async def cached() -> None:
            assert (await client.get(ConfigMap, "s", namespace=ns)).data == {"v": "1"}

        await eventually(cached)
        created.data = {"v": "2"}
        await client.update(created)

        async def converged() -> None:
            assert (await client.get(ConfigMap, "s", namespace=ns)).data == {"v": "2"}

        await eventually(converged)


async def test_the_split_client_reads_uncached_kinds_and_unstructured_objects_from_the_apiserver(
    backend: Backend,
) -> None:
    ns = backend.namespace
    async with cache_of(backend) as cache:
        client = SplitClient(cache, backend.client, uncached=[Widget])
        await client.create(Widget(metadata=ObjectMeta(name="w", namespace=ns)))
        assert (await client.get(Widget, "w", namespace=ns)).name == "w"
        await client.create(cm(ns, "raw"))
        raw = await client.get(GroupVersionKind("", "v1", "ConfigMap"), "raw", namespace=ns)
        assert raw["metadata"]["name"] == "raw"
        assert cache._kinds == {}


async def test_cluster_scoped_kinds_are_read_without_a_namespace(backend: Backend) -> None:
    with contextlib.suppress(AlreadyExists):  # the real namespace exists, the fake's not yet
        await backend.client.create(Namespace(metadata=ObjectMeta(name=backend.namespace)))
    async with cache_of(backend) as cache:
        got = await cache.get(Namespace, backend.namespace)
        assert got.name == backend.namespace
        assert backend.namespace in [n.name for n in await cache.list(Namespace)]


async def test_the_split_client_hands_list_options_to_a_reader_of_the_protocol_only() -> None:
    class RecordingReader:  # a user's Reader: the Protocol's methods, not pyctrl's ReaderBase
        def __init__(self) -> None:
            self.calls: list[dict[str, Any]] = []

        async def get(self, kind: Any, name: str, *, namespace: str | None = None) -> Any:
            return {"metadata": {"name": name, "namespace": namespace}}

        async def list(self, kind: Any, **options: Any) -> Any:
            self.calls.append(options)
            return ObjectList([], "1")

    reader = RecordingReader()
    client = SplitClient(cast(Any, reader), cast(Any, None))
    await client.list(ConfigMap, namespace="ns", labels={"app": "redis"}, field_selector="a=b", limit=5)
    (options,) = reader.calls
    assert options["namespace"] == "ns"
    assert str(options["label_selector"]) == "app=redis"
    assert str(options["field_selector"]) == "a=b"
    assert (options["limit"], options["continue_"]) == (5, None)
    got: Any = await client.get(ConfigMap, "x", namespace="ns")  # whatever the user's reader returns
    assert got["metadata"]["name"] == "x"
