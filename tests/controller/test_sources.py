"""pyctrl.source: the Kind source turns informer notifications into events (on a cache over the
fake client); the Channel source forwards generic events; both apply their predicates."""

from __future__ import annotations

import asyncio
from typing import Any

from pyctrl.cache import Cache
from pyctrl.cache.reflector import Change
from pyctrl.client.fake import FakeClient
from pyctrl.client.objects import ConfigMap, ObjectMeta
from pyctrl.event import CreateEvent, DeleteEvent, Event, GenericEvent, UpdateEvent, event_type
from pyctrl.handler import RequestQueue, enqueue_request_for_object
from pyctrl.predicate import resource_version_changed
from pyctrl.reconcile import Request
from pyctrl.source import Channel, Kind
from pyctrl.testing import eventually


class RecordingHandler:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def _record(self, event: Event, queue: RequestQueue) -> None:
        self.events.append(event)
        queue.add(Request("ns", "x"))

    create = update = delete = generic = _record


class Sink:
    def __init__(self) -> None:
        self.sources: list[str] = []
        self.added: list[Request] = []

    def for_event(self, event: Event, source: str) -> RequestQueue:
        self.sources.append(f"{event_type(event)} {source}")
        sink = self

        class Queue:
            def add(self, item: Request, *, priority: int = 0) -> None:
                sink.added.append(item)

        return Queue()


def cm(name: str, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns"), data=data or None)


async def test_kind_source_reports_the_initial_list_then_live_creates_updates_and_deletes() -> None:
    client = FakeClient(cm("old"))
    cache = Cache(client)
    await cache.start()
    handler, sink = RecordingHandler(), Sink()
    source = Kind(cache, ConfigMap, handler)
    try:
        await source.start(sink)
        await source.wait_for_sync()
        await eventually(lambda: len(handler.events) == 1, within=10.0, what="initial list", interval=0.01)
        created = await client.create(cm("new"))
        created.data = {"k": "v"}
        updated = await client.update(created)
        await client.delete(updated)
        await eventually(lambda: len(handler.events) == 4, within=10.0, what="live events", interval=0.01)
    finally:
        await source.stop()
        await cache.stop()
    first, create, update, delete = handler.events
    assert isinstance(first, CreateEvent)
    assert first.is_in_initial_list
    assert isinstance(create, CreateEvent)
    assert not create.is_in_initial_list
    assert isinstance(update, UpdateEvent)
    assert update.object_new.data == {"k": "v"}
    assert isinstance(update.object_old, ConfigMap)
    assert update.object_old.data is None
    assert isinstance(delete, DeleteEvent)
    assert not delete.delete_state_unknown
    assert sink.sources == ["create ConfigMap", "create ConfigMap", "update ConfigMap", "delete ConfigMap"]


async def test_kind_source_predicates_filter_before_the_handler() -> None:
    client = FakeClient()
    cache = Cache(client, resync_period=None)
    await cache.start()
    handler = RecordingHandler()
    source = Kind(cache, ConfigMap, handler, [lambda e: isinstance(e, CreateEvent)])
    try:
        await source.start(Sink())
        await source.wait_for_sync()
        obj = await client.create(cm("a"))
        obj.data = {"k": "v"}
        await client.update(obj)
        await client.create(cm("b"))
        await eventually(lambda: len(handler.events) == 2, within=10.0, what="two creates", interval=0.01)
    finally:
        await source.stop()
        await cache.stop()
    assert all(isinstance(e, CreateEvent) for e in handler.events)


async def test_channel_source_forwards_generic_events_and_wraps_plain_objects() -> None:
    events: asyncio.Queue[Any] = asyncio.Queue()
    handler, sink = RecordingHandler(), Sink()
    source = Channel(events, handler, [resource_version_changed])
    await source.start(sink)
    try:
        events.put_nowait(GenericEvent(cm("a")))
        events.put_nowait(cm("b"))  # a bare object becomes a GenericEvent
        await eventually(
            lambda: len(handler.events) == 2, within=10.0, what="two generic events", interval=0.01
        )
    finally:
        await source.stop()
    assert [type(e) for e in handler.events] == [GenericEvent, GenericEvent]
    assert [e.object.metadata.name for e in handler.events] == ["a", "b"]  # type: ignore[union-attr]
    assert sink.sources == ["generic channel", "generic channel"]
    assert sink.added == [Request("ns", "x")] * 2


class CountingDecoder:
    """The informer's decoder for ConfigMaps, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: bytes) -> ConfigMap:
        self.calls += 1
        return ConfigMap.model_validate_json(data)


def _change(kind: str, old: ConfigMap | None, new: ConfigMap | None, **flags: bool) -> Change:
    def stored(obj: ConfigMap | None) -> bytes | None:
        return None if obj is None else obj.model_dump_json(by_alias=True, exclude_none=True).encode()

    return Change(kind, ("ns", "a"), stored(old), stored(new), **flags)  # type: ignore[arg-type]


def test_kind_source_events_decode_nothing_for_the_object_handler_and_each_object_once_when_read() -> None:
    source = Kind(Cache(FakeClient()), ConfigMap, enqueue_request_for_object())
    sink = Sink()
    source._dispatch.sink = sink  # as Kind.start does, without an informer
    decode = CountingDecoder()
    source.on_change(_change("add", None, cm("a"), in_initial_list=True), decode)
    source.on_change(_change("update", cm("a"), cm("a", k="v")), decode)
    source.on_change(_change("delete", cm("a", k="v"), None), decode)
    assert decode.calls == 0  # the key and the stored bytes were enough
    assert sink.added == [Request("ns", "a")] * 3
    assert sink.sources == ["create ConfigMap", "update ConfigMap", "delete ConfigMap"]

    seen: list[Event] = []

    def record(event: Event) -> bool:
        seen.append(event)
        return True

    reading = Kind(Cache(FakeClient()), ConfigMap, RecordingHandler(), [record])
    reading._dispatch.sink = Sink()
    reading.on_change(_change("update", cm("a"), cm("a", k="v")), decode)
    (update,) = seen
    assert isinstance(update, UpdateEvent)
    assert update.object_new.data == {"k": "v"}
    assert update.object_new is update.object_new  # decoded once, then kept
    assert decode.calls == 1
    assert update.object_old.data is None
    assert decode.calls == 2


def test_kind_source_events_from_one_change_hold_fresh_objects_each() -> None:
    handler = RecordingHandler()
    source = Kind(Cache(FakeClient()), ConfigMap, handler)
    source._dispatch.sink = Sink()
    change = _change("add", None, cm("a", k="v"))
    source.on_change(change, CountingDecoder())
    source.on_change(change, CountingDecoder())
    first, second = handler.events
    assert isinstance(first, CreateEvent)
    assert isinstance(second, CreateEvent)
    assert first.object == second.object
    assert first.object is not second.object
    first.object.data["k"] = "changed"
    assert second.object.data == {"k": "v"}


def test_a_tombstone_from_the_cache_is_a_delete_with_its_state_unknown() -> None:
    handler = RecordingHandler()
    source = Kind(Cache(FakeClient()), ConfigMap, handler)
    source._dispatch.sink = Sink()
    source.on_change(_change("delete", cm("a"), None, tombstone=True), CountingDecoder())
    (event,) = handler.events
    assert isinstance(event, DeleteEvent)
    assert event.delete_state_unknown
    assert event.object.metadata.name == "a"
