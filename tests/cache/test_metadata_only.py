"""Metadata-only informers (``PartialObjectMetadata``): events, indexes, selectors and the two
representations of one kind, on the fake client and the real apiserver; what an apiserver that
does not serve the representation gives, on the real one."""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest

from pyctrl.cache import ByObject, Cache, DeletedFinalStateUnknown, ListWatchSource
from pyctrl.client import (
    ApiClient,
    HTTPRequest,
    HTTPTransport,
    ListOptions,
    NotAcceptable,
    NotFound,
    ObjectMeta,
    PartialObjectMetadata,
    Secret,
)
from pyctrl.client.scheme import Kind
from tests.cache.support import informer_for
from tests.client.support import Backend, eventually

SecretMeta = PartialObjectMetadata.of(Secret)
PAYLOAD = base64.b64encode(b"p" * 4096).decode()


def secret(ns: str, name: str, labels: dict[str, str] | None = None, **annotations: str) -> Secret:
    meta = ObjectMeta(name=name, namespace=ns, labels=labels, annotations=annotations or None)
    return Secret(metadata=meta, data={"payload": PAYLOAD})


class MetaRecorder:
    """Records handler calls as (event, name, labels) and what each object carried."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, str] | None]] = []
        self.types: set[str] = set()

    def _seen(self, event: str, obj: Any) -> None:
        final = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        assert isinstance(final, PartialObjectMetadata)
        assert "data" not in final.model_dump(by_alias=True)
        self.types.add(f"{final.api_version}/{final.kind}")
        self.events.append((event, final.name, final.metadata.labels))

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._seen("add", obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._seen("update", new)

    def on_delete(self, obj: Any) -> None:
        self._seen("delete", obj)


async def test_a_metadata_only_informer_stores_and_delivers_metadata_only(backend: Backend) -> None:
    ns, client = backend.namespace, backend.client
    await client.create(secret(ns, "before", {"v": "1"}))
    informer = await informer_for(backend, SecretMeta)
    recorder = MetaRecorder()
    informer.add_event_handler(recorder)
    async with informer:
        assert await informer.wait_for_sync(30)
        live = await client.create(secret(ns, "live", {"v": "1"}))
        live.metadata.labels = {"v": "2"}
        await client.update(live)
        await client.delete(live)

        async def all_seen() -> None:
            assert [e for e in recorder.events if e[1] == "live"] == [
                ("add", "live", {"v": "1"}),
                ("update", "live", {"v": "2"}),
                ("delete", "live", {"v": "2"}),
            ]

        await eventually(all_seen)
        assert ("add", "before", {"v": "1"}) in recorder.events
        assert recorder.types == {"v1/Secret"}
        stored = informer.store.get(ns, "before")
        assert stored is not None
        assert PAYLOAD.encode() not in stored  # 4 KiB of payload never cached
        assert len(stored) < 1024


async def test_metadata_only_cache_reads_use_label_selectors_and_indexes(backend: Backend) -> None:
    ns, client = backend.namespace, backend.client
    await client.create(secret(ns, "a", {"tier": "cache"}, owner="alice"))
    await client.create(secret(ns, "b", {"tier": "cache"}, owner="bob"))
    await client.create(secret(ns, "c", {"tier": "other"}, owner="alice"))
    by_object: dict[Kind, ByObject] = {Secret: ByObject(labels={"tier": "cache"})}
    cache = Cache(cast(ListWatchSource, client), by_object=by_object, default_namespaces=[ns])
    await cache.index_field(SecretMeta, "owner", lambda s: [(s.metadata.annotations or {}).get("owner", "")])
    async with cache:
        alice = await cache.list(SecretMeta, namespace=ns, fields={"owner": "alice"})
        assert [(s.kind, s.name) for s in alice.items] == [("Secret", "a")]  # c is not selected
        listed = await cache.list(SecretMeta, namespace=ns)
        assert sorted(s.name for s in listed.items) == ["a", "b"]
        got = await cache.get(SecretMeta, "b", namespace=ns)
        assert isinstance(got, PartialObjectMetadata)
        assert got.metadata.annotations == {"owner": "bob"}
        assert "data" not in got.model_dump(by_alias=True)


async def test_each_representation_of_a_kind_has_its_own_informer(backend: Backend) -> None:
    # controller-runtime's behaviour: a metadata-only read of a kind cached in full (and the
    # reverse) is not answered from the other representation: it starts an informer of its own
    ns, client = backend.namespace, backend.client
    await client.create(secret(ns, "s", {"v": "1"}))
    async with Cache(cast(ListWatchSource, client), default_namespaces=[ns]) as cache:
        full = await cache.get(Secret, "s", namespace=ns)
        assert full.data == {"payload": PAYLOAD}
        assert len(cache._kinds) == 1
        meta = await cache.get(SecretMeta, "s", namespace=ns)
        assert "data" not in meta.model_dump(by_alias=True)
        assert meta.metadata.uid == full.metadata.uid
        assert len(cache._kinds) == 2
        full_informer = await cache.get_informer(Secret)
        meta_informer = await cache.get_informer(SecretMeta)
        assert full_informer.informers[ns] is not meta_informer.informers[ns]
        assert (await cache.get_informer(SecretMeta)).informers[ns] is meta_informer.informers[ns]


class _Accept:
    """Wraps the real transport, replacing the ``Accept`` of metadata-only requests."""

    def __init__(self, inner: HTTPTransport, accept: str) -> None:
        self.inner, self.accept = inner, accept

    def _changed(self, request: HTTPRequest) -> HTTPRequest:
        if request.accept is None:
            return request
        return HTTPRequest(
            request.method, request.path, request.params, timeout=request.timeout, accept=self.accept
        )

    async def send(self, request: HTTPRequest) -> bytes:
        return await self.inner.send(self._changed(request))

    def stream(self, request: HTTPRequest) -> AsyncGenerator[bytes, None]:
        return self.inner.stream(self._changed(request))


@pytest.mark.controlplane
@pytest.mark.parametrize(
    ("accept", "says"),
    [
        # an apiserver that ignores the representation asked for and answers in full
        (
            "application/json",
            "the server answered v1/Secret(List)?, not the PartialObjectMetadata(List)? asked",
        ),
        # one that refuses it (406): the real apiserver's answer to a representation it lacks
        (
            "application/json;as=Unserved;g=meta.k8s.io;v=v1",
            "the server does not serve PartialObjectMetadata",
        ),
    ],
)
async def test_an_apiserver_not_serving_the_representation_gives_a_clear_error(
    api: ApiClient, namespace: str, accept: str, says: str
) -> None:
    await api.create(secret(namespace, "s"))
    client = ApiClient(api.config, transport=_Accept(api.transport, accept))
    try:
        for read in (
            client.list(SecretMeta, namespace=namespace),
            client.get(SecretMeta, "s", namespace=namespace),
        ):
            with pytest.raises(NotAcceptable, match=says) as info:
                await read
            assert f"/namespaces/{namespace}/secrets" in info.value.message
        # an informer's source: its paged list and its (streaming-list) watch
        lw = await client.list_watcher(SecretMeta, ListOptions.build(namespace=namespace))
        with pytest.raises(NotAcceptable, match=says):
            await lw.list(resource_version="0", limit=10, continue_=None)
        events = lw.watch(resource_version="", timeout_seconds=30, send_initial_events=True)
        with pytest.raises(NotAcceptable, match=says):
            await anext(aiter(events))
    finally:
        await client.close()


async def test_the_metadata_representation_can_have_options_of_its_own(backend: Backend) -> None:
    # least privilege: Secrets in full only with the operator's label, every Secret's metadata
    ns, client = backend.namespace, backend.client
    await client.create(secret(ns, "owned", {"managed-by": "op"}))
    await client.create(secret(ns, "users", {"team": "a"}))
    by_object: dict[Kind, ByObject] = {Secret: ByObject(labels={"managed-by": "op"}), SecretMeta: ByObject()}
    async with Cache(cast(ListWatchSource, client), by_object=by_object, default_namespaces=[ns]) as cache:
        full = await cache.list(Secret, namespace=ns)
        assert [(s.name, s.data) for s in full.items] == [("owned", {"payload": PAYLOAD})]
        with pytest.raises(NotFound):
            await cache.get(Secret, "users", namespace=ns)  # never held in full
        meta = await cache.list(SecretMeta, namespace=ns)
        assert sorted(s.name for s in meta.items) == ["owned", "users"]
        assert all("data" not in s.model_dump(by_alias=True) for s in meta.items)
        stored = (await cache.get_informer(SecretMeta)).informers[ns].store.get(ns, "users")
        assert stored is not None
        assert PAYLOAD.encode() not in stored


async def test_a_kinds_own_options_still_apply_to_its_metadata_representation(backend: Backend) -> None:
    ns, client = backend.namespace, backend.client
    await client.create(secret(ns, "owned", {"managed-by": "op"}))
    await client.create(secret(ns, "users", {"team": "a"}))
    by_object: dict[Kind, ByObject] = {Secret: ByObject(labels={"managed-by": "op"})}
    async with Cache(cast(ListWatchSource, client), by_object=by_object, default_namespaces=[ns]) as cache:
        assert [s.name for s in (await cache.list(SecretMeta, namespace=ns)).items] == ["owned"]
