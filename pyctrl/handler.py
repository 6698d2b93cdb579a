"""Map events to reconcile requests (controller-runtime ``pkg/handler``).

A handler receives an event and a ``RequestQueue`` (the controller's workqueue, seen through
``add``) and enqueues the ``Request``s the event implies:

- ``enqueue_request_for_object()``: the object itself;
- ``enqueue_request_for_owner(owner_kind, only_controller=True)``: the owner named by the object's
  ownerReferences (by default only the *controller* owner), in the object's namespace, or with
  namespace ``""`` when the owner kind is cluster-scoped (asked of the REST mapper when the
  ``Kind`` source starts); for updates both the old and the new owners, so moving ownership
  reconciles both;
- ``enqueue_requests_from_map_func(fn)``: whatever ``fn(obj)`` returns (old and new on update).

Priorities (controller-runtime priority queue): objects from an informer's initial list and
resync updates (resourceVersion unchanged) are enqueued at ``LOW_PRIORITY`` so live changes go
first; everything else at priority 0. ``with_priority(handler, priority)`` enqueues every request
of ``handler`` at a fixed priority instead: e.g. a health prober's ``Channel`` at a high priority,
so the work it signals is handed out before routine requests already queued (what
controller-runtime does with a handler calling ``AddWithOpts(priorityqueue.AddOpts{Priority: &p},
req)``; its ``WithLowPriorityWhenUnchanged`` is this module's default behaviour).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pyctrl import _access
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.scheme import Kind, kind_gvk
from pyctrl.event import (
    CachedUpdateEvent,
    CreateEvent,
    DeleteEvent,
    Event,
    GenericEvent,
    UpdateEvent,
    event_key,
)
from pyctrl.reconcile import Request
from pyctrl.workqueue import LOW_PRIORITY

__all__ = [
    "EventHandler",
    "MapFunc",
    "RequestQueue",
    "dispatch",
    "enqueue_request_for_object",
    "enqueue_request_for_owner",
    "enqueue_requests_from_map_func",
    "with_priority",
]


class RequestQueue(Protocol):
    """The part of the workqueue a handler uses."""

    def add(self, item: Request, *, priority: int = 0) -> None: ...


@runtime_checkable
class EventHandler(Protocol):
    def create(self, event: CreateEvent, queue: RequestQueue) -> None: ...
    def update(self, event: UpdateEvent, queue: RequestQueue) -> None: ...
    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None: ...
    def generic(self, event: GenericEvent, queue: RequestQueue) -> None: ...


MapFunc = Callable[[Any], Iterable[Request]]


def dispatch(handler: EventHandler, event: Event, queue: RequestQueue) -> None:
    """Call the handler method for the event's type."""
    match event:
        case CreateEvent():
            handler.create(event, queue)
        case UpdateEvent():
            handler.update(event, queue)
        case DeleteEvent():
            handler.delete(event, queue)
        case GenericEvent():
            handler.generic(event, queue)


def _update_priority(event: UpdateEvent) -> int:
    if isinstance(event, CachedUpdateEvent):  # equal stored bytes: equal resourceVersions
        unchanged = event.unchanged
    else:
        unchanged = _access.resource_version(event.object_old) == _access.resource_version(event.object_new)
    return LOW_PRIORITY if unchanged else 0


@dataclass(frozen=True)
class _MapHandler:
    """Shared body: map each object of an event to requests and enqueue them, deduplicated."""

    map_object: MapFunc

    def _add(self, queue: RequestQueue, objects: Iterable[Any], priority: int) -> None:
        seen: set[Request] = set()
        for obj in objects:
            for request in self.map_object(obj):
                if request not in seen:
                    seen.add(request)
                    queue.add(request, priority=priority)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._add(queue, [event.object], LOW_PRIORITY if event.is_in_initial_list else 0)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self._add(queue, [event.object_new, event.object_old], _update_priority(event))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._add(queue, [event.object], 0)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._add(queue, [event.object], 0)


def _self_request(obj: Any) -> list[Request]:
    return [Request(_access.namespace(obj), _access.name(obj))]


@dataclass(frozen=True)
class _ForObject(_MapHandler):
    """``enqueue_request_for_object``: one request per event, from the event's key (an event of a
    ``Kind`` source knows it without decoding its object)."""

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        queue.add(Request(*event_key(event)), priority=LOW_PRIORITY if event.is_in_initial_list else 0)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        queue.add(Request(*event_key(event)), priority=_update_priority(event))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        queue.add(Request(*event_key(event)), priority=0)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        queue.add(Request(*event_key(event)), priority=0)


def enqueue_request_for_object() -> EventHandler:
    """Enqueue the object of each event (for updates, the new object: same name as the old)."""
    return _ForObject(_self_request)


class _OwnerHandler(_MapHandler):
    """``enqueue_request_for_owner``; the owner's scope comes from the REST mapper at source start."""

    def __init__(self, owner: GroupVersionKind, only_controller: bool, namespaced: bool | None) -> None:
        super().__init__(self._owners)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "only_controller", only_controller)
        object.__setattr__(self, "owner_namespaced", namespaced)

    owner: GroupVersionKind
    only_controller: bool
    owner_namespaced: bool | None

    async def resolve_scope(self, mapping: Callable[[GroupVersionKind], Awaitable[Any]]) -> None:
        """Learn whether the owner kind is namespaced (``mapping`` returns a ``RESTMapping``)."""
        if self.owner_namespaced is None:
            object.__setattr__(self, "owner_namespaced", bool((await mapping(self.owner)).namespaced))

    def _owners(self, obj: Any) -> list[Request]:
        # A namespaced owner lives in its dependent's namespace (Kubernetes refuses other
        # namespaces); a cluster-scoped owner is requested with namespace "".
        namespace = "" if self.owner_namespaced is False else _access.namespace(obj)
        out = []
        for ref in _access.owner_references(obj):
            if self.only_controller and not ref.get("controller"):
                continue
            try:
                ref_gvk = GroupVersionKind.from_api_version(
                    str(ref.get("apiVersion", "")), str(ref.get("kind"))
                )
            except ValueError:
                continue
            if (ref_gvk.group, ref_gvk.kind) == (self.owner.group, self.owner.kind):
                out.append(Request(namespace, str(ref.get("name", ""))))
        return out


def enqueue_request_for_owner(
    owner_kind: Kind, *, only_controller: bool = True, owner_namespaced: bool | None = None
) -> EventHandler:
    """Enqueue the owner of kind ``owner_kind`` named in each object's ownerReferences.

    ``owner_namespaced=None`` asks the REST mapper when a ``Kind`` source starts (as
    controller-runtime does at construction); until then, or for other sources, the owner is
    taken to be namespaced. Pass ``False`` for a cluster-scoped owner watched through a
    ``Channel``.
    """
    return _OwnerHandler(kind_gvk(owner_kind), only_controller, owner_namespaced)


def enqueue_requests_from_map_func(fn: MapFunc) -> EventHandler:
    """Enqueue whatever ``fn(obj)`` returns for each object of an event."""
    return _MapHandler(fn)


@dataclass(frozen=True)
class _FixedPriorityQueue:
    """The queue a ``with_priority`` handler hands to the handler it wraps."""

    queue: RequestQueue
    priority: int

    def add(self, item: Request, *, priority: int = 0) -> None:
        self.queue.add(item, priority=self.priority)


@dataclass(frozen=True)
class _WithPriority:
    handler: EventHandler
    priority: int

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self.handler.create(event, _FixedPriorityQueue(queue, self.priority))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self.handler.update(event, _FixedPriorityQueue(queue, self.priority))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self.handler.delete(event, _FixedPriorityQueue(queue, self.priority))

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self.handler.generic(event, _FixedPriorityQueue(queue, self.priority))


def with_priority(handler: EventHandler, priority: int) -> EventHandler:
    """``handler``, but every request it enqueues is added at ``priority`` (higher is handed out
    first; the queue keeps the highest priority given to a request that is already waiting).

    Meant for events that signal urgent work, e.g. a health prober's ``Channel``: such a request
    goes ahead of every routine one (priority 0, or ``LOW_PRIORITY`` for resyncs and periodic
    requeues) already queued, and a request already waiting is raised to ``priority`` in place.
    """
    if not isinstance(handler, EventHandler):
        raise TypeError(f"with_priority: not an event handler: {handler!r}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"with_priority: priority must be an int, got {priority!r}")
    return _WithPriority(handler, priority)
