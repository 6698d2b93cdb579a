"""pyctrl.handler: requests each handler enqueues, and at which priority."""

from __future__ import annotations

from typing import Any

from pyctrl.client.objects import ConfigMap, Namespace, ObjectMeta, OwnerReference, StatefulSet
from pyctrl.client.restmapper import StaticRESTMapper
from pyctrl.event import (
    CachedCreateEvent,
    CachedDeleteEvent,
    CachedUpdateEvent,
    CreateEvent,
    DeleteEvent,
    Event,
    GenericEvent,
    UpdateEvent,
)
from pyctrl.handler import (
    EventHandler,
    _OwnerHandler,
    dispatch,
    enqueue_request_for_object,
    enqueue_request_for_owner,
    enqueue_requests_from_map_func,
)
from pyctrl.reconcile import Request
from pyctrl.workqueue import LOW_PRIORITY

from ._util import WIDGET_GVK, Widget


class RecordingQueue:
    def __init__(self) -> None:
        self.added: list[tuple[Request, int]] = []

    def add(self, item: Request, *, priority: int = 0) -> None:
        self.added.append((item, priority))


def run(handler: EventHandler, event: Event) -> list[tuple[Request, int]]:
    queue = RecordingQueue()
    dispatch(handler, event, queue)
    return queue.added


def ref(
    kind: str, name: str, *, api_version: str = "apps/v1", controller: bool | None = True
) -> OwnerReference:
    return OwnerReference(
        api_version=api_version, kind=kind, name=name, uid=f"uid-{name}", controller=controller
    )


def child(*refs: OwnerReference, rv: str = "1", name: str = "child") -> ConfigMap:
    return ConfigMap(
        metadata=ObjectMeta(
            name=name, namespace="ns", resource_version=rv, owner_references=list(refs) or None
        )
    )


def test_for_object_enqueues_the_object_itself_at_normal_priority() -> None:
    h = enqueue_request_for_object()
    obj = child()
    want = [(Request("ns", "child"), 0)]
    assert run(h, CreateEvent(obj)) == want
    assert run(h, DeleteEvent(obj)) == want
    assert run(h, GenericEvent(obj)) == want
    assert run(h, UpdateEvent(obj, child(rv="2"))) == want


def test_initial_list_objects_are_enqueued_at_low_priority() -> None:
    assert run(enqueue_request_for_object(), CreateEvent(child(), is_in_initial_list=True)) == [
        (Request("ns", "child"), LOW_PRIORITY)
    ]


def test_resync_updates_with_an_unchanged_resource_version_are_enqueued_at_low_priority() -> None:
    for h in (enqueue_request_for_object(), enqueue_request_for_owner(StatefulSet)):
        obj = child(ref("StatefulSet", "owner"), rv="7")
        assert [p for _, p in run(h, UpdateEvent(obj, obj))] == [LOW_PRIORITY]
        assert [p for _, p in run(h, UpdateEvent(obj, child(ref("StatefulSet", "owner"), rv="8")))] == [0]


def test_owner_handler_enqueues_the_controller_owner_only_by_default() -> None:
    obj = child(ref("StatefulSet", "ctrl"), ref("StatefulSet", "plain", controller=None))
    assert run(enqueue_request_for_owner(StatefulSet), CreateEvent(obj)) == [(Request("ns", "ctrl"), 0)]
    every = run(enqueue_request_for_owner(StatefulSet, only_controller=False), CreateEvent(obj))
    assert every == [(Request("ns", "ctrl"), 0), (Request("ns", "plain"), 0)]


def test_owner_handler_ignores_owners_of_other_kinds_and_groups() -> None:
    obj = child(
        ref("Deployment", "d"),
        ref("StatefulSet", "other-group", api_version="example.com/v1", controller=None),
        ref("Widget", "w", api_version="test.pyctrl.dev/v1", controller=None),
    )
    assert run(enqueue_request_for_owner(StatefulSet, only_controller=False), CreateEvent(obj)) == []
    assert run(enqueue_request_for_owner(Widget, only_controller=False), CreateEvent(obj)) == [
        (Request("ns", "w"), 0)
    ]
    # the kind may also be named by GVK, and any version of the group matches
    by_gvk = enqueue_request_for_owner(WIDGET_GVK, only_controller=False)
    moved = child(ref("Widget", "w", api_version="test.pyctrl.dev/v2", controller=None))
    assert run(by_gvk, CreateEvent(moved)) == [(Request("ns", "w"), 0)]


def test_owner_handler_enqueues_old_and_new_owners_when_ownership_moves() -> None:
    old = child(ref("StatefulSet", "before"), rv="1")
    new = child(ref("StatefulSet", "after"), rv="2")
    got = run(enqueue_request_for_owner(StatefulSet), UpdateEvent(old, new))
    assert sorted(r.name for r, _ in got) == ["after", "before"]


def test_owner_handler_enqueues_an_owner_once_per_event() -> None:
    old = child(ref("StatefulSet", "same"), rv="1")
    new = child(ref("StatefulSet", "same"), rv="2")
    assert run(enqueue_request_for_owner(StatefulSet), UpdateEvent(old, new)) == [(Request("ns", "same"), 0)]


def test_owner_handler_requests_a_cluster_scoped_owner_without_a_namespace() -> None:
    obj = child(ref("Namespace", "ns", api_version="v1"))
    given = enqueue_request_for_owner(Namespace, owner_namespaced=False)
    assert run(given, CreateEvent(obj)) == [(Request("", "ns"), 0)]


async def test_owner_handler_asks_the_rest_mapper_for_the_owner_scope() -> None:
    obj = child(ref("Namespace", "ns", api_version="v1"), ref("StatefulSet", "sts", controller=None))
    mapper = StaticRESTMapper()
    for kind, want in ((Namespace, Request("", "ns")), (StatefulSet, Request("ns", "sts"))):
        handler = enqueue_request_for_owner(kind, only_controller=False)
        assert isinstance(handler, _OwnerHandler)
        await handler.resolve_scope(mapper.mapping)
        assert run(handler, CreateEvent(obj)) == [(want, 0)]


def test_map_func_handler_enqueues_what_the_function_returns_deduplicated() -> None:
    def fan_out(obj: Any) -> list[Request]:
        return [Request("ns", "x"), Request("ns", "y"), Request("ns", "x")]

    h = enqueue_requests_from_map_func(fan_out)
    assert run(h, GenericEvent(child())) == [(Request("ns", "x"), 0), (Request("ns", "y"), 0)]
    assert [p for _, p in run(h, CreateEvent(child(), is_in_initial_list=True))] == [LOW_PRIORITY] * 2


def test_for_object_takes_the_key_and_priority_of_a_cached_event_without_decoding_it() -> None:
    def refuse(data: bytes) -> Any:
        raise AssertionError("decoded")

    h, key = enqueue_request_for_object(), ("ns", "child")
    stored, newer = b'{"metadata":{"resourceVersion":"1"}}', b'{"metadata":{"resourceVersion":"2"}}'
    assert run(h, CachedCreateEvent(key, stored, refuse, True)) == [(Request("ns", "child"), LOW_PRIORITY)]
    assert run(h, CachedUpdateEvent(key, stored, stored, refuse)) == [(Request("ns", "child"), LOW_PRIORITY)]
    assert run(h, CachedUpdateEvent(key, stored, newer, refuse)) == [(Request("ns", "child"), 0)]
    assert run(h, CachedDeleteEvent(key, stored, refuse)) == [(Request("ns", "child"), 0)]
