"""Events delivered by sources to predicates and handlers (controller-runtime ``pkg/event``).

``CreateEvent.is_in_initial_list`` is True for objects of an informer's initial list (not for
objects created later), so handlers can enqueue them at low priority. A ``DeleteEvent`` whose
``delete_state_unknown`` is True carries the last known state of an object whose deletion was
missed while the watch was down (client-go's ``DeletedFinalStateUnknown``).

Events from a ``Kind`` source decode their objects from the cache's bytes on first access (each
event its own fresh copy, as before; an event whose objects nobody reads costs no decoding: the
controller's own ``enqueue_request_for_object`` needs only the key). To every reader they are the
same classes with the same attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["CreateEvent", "DeleteEvent", "Event", "GenericEvent", "UpdateEvent", "event_key"]


@dataclass(frozen=True, slots=True)
class _ObjectEvent:
    """An event about one object (all but ``UpdateEvent``, which carries the old and the new)."""

    object: Any


@dataclass(frozen=True, slots=True)
class CreateEvent(_ObjectEvent):
    """The object appeared: created, or listed when the informer (re)started."""

    is_in_initial_list: bool = False


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """The object changed from ``object_old`` to ``object_new`` (a resync delivers equal ones)."""

    object_old: Any
    object_new: Any


@dataclass(frozen=True, slots=True)
class DeleteEvent(_ObjectEvent):
    """The object was deleted (its last known state; see ``delete_state_unknown``)."""

    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class GenericEvent(_ObjectEvent):
    """An event from outside the cluster (a ``Channel`` source), naming an object to reconcile."""


Event: TypeAlias = CreateEvent | UpdateEvent | DeleteEvent | GenericEvent


def event_type(event: Event) -> str:
    """ "create", "update", "delete" or "generic"."""
    match event:
        case CreateEvent():
            return "create"
        case UpdateEvent():
            return "update"
        case DeleteEvent():
            return "delete"
    return "generic"


def event_key(event: Event) -> tuple[str, str]:
    """(namespace, name) of the object an event is about (the new object for updates); without
    decoding it when the event comes from the cache."""
    if isinstance(event, _FromCache):
        return event.key
    meta = _meta(event_object(event))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _meta(obj: Any) -> dict[str, Any]:
    metadata = getattr(obj, "metadata", None)  # a typed object
    if metadata is not None:
        return {"namespace": metadata.namespace, "name": metadata.name}
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


# -- events of a Kind source: objects decoded from the cache on first access --------------------

Decode: TypeAlias = Callable[[bytes], Any]
# The slots of the public classes, written once a lazy object is decoded (the classes are frozen).
_OBJECT = _ObjectEvent.__dict__["object"]
_IN_INITIAL_LIST = CreateEvent.__dict__["is_in_initial_list"]
_OLD = UpdateEvent.__dict__["object_old"]
_NEW = UpdateEvent.__dict__["object_new"]
_DELETE_STATE_UNKNOWN = DeleteEvent.__dict__["delete_state_unknown"]
_PENDING: Any = object()
_set = object.__setattr__  # the frozen classes refuse setattr; their lazy subclasses set their own slots


def _decoded(event: Any, slot: Any, data: bytes, decode: Decode) -> Any:
    """The object in ``slot`` of ``event``: decoded from ``data`` on the first read, then kept."""
    obj = slot.__get__(event)
    if obj is _PENDING:
        obj = decode(data)
        slot.__set__(event, obj)
    return obj


class _FromCache:
    """Marks an event built from cached bytes; ``key`` is its object's (namespace, name)."""

    __slots__ = ()
    key: tuple[str, str]


class _LazyObjectEvent(_FromCache):
    """The ``object`` of a create or delete event from the cache, decoded on its first read."""

    __slots__ = ()
    _source: tuple[bytes, Decode]

    def _hold(self, key: tuple[str, str], data: bytes, decode: Decode) -> None:
        _OBJECT.__set__(self, _PENDING)
        _set(self, "key", key)
        _set(self, "_source", (data, decode))

    @property
    def object(self) -> Any:
        data, decode = self._source
        return _decoded(self, _OBJECT, data, decode)


class CachedCreateEvent(_LazyObjectEvent, CreateEvent):
    """A ``CreateEvent`` whose object is decoded from ``data`` when first read."""

    __slots__ = ("_source", "key")

    def __init__(self, key: tuple[str, str], data: bytes, decode: Decode, is_in_initial_list: bool) -> None:
        self._hold(key, data, decode)
        _IN_INITIAL_LIST.__set__(self, is_in_initial_list)


class CachedUpdateEvent(UpdateEvent, _FromCache):
    """An ``UpdateEvent`` whose objects are decoded from ``old``/``new`` when first read;
    ``unchanged``: the stored bytes are equal (a resync or a relist that found no change)."""

    __slots__ = ("_source", "key", "unchanged")
    _source: tuple[bytes, bytes, Decode]
    unchanged: bool

    def __init__(self, key: tuple[str, str], old: bytes, new: bytes, decode: Decode) -> None:
        _OLD.__set__(self, _PENDING)
        _NEW.__set__(self, _PENDING)
        _set(self, "key", key)
        _set(self, "_source", (old, new, decode))
        _set(self, "unchanged", old == new)

    @property
    def object_old(self) -> Any:
        old, _, decode = self._source
        return _decoded(self, _OLD, old, decode)

    @property
    def object_new(self) -> Any:
        _, new, decode = self._source
        return _decoded(self, _NEW, new, decode)


class CachedDeleteEvent(_LazyObjectEvent, DeleteEvent):
    """A ``DeleteEvent`` (not a tombstone) whose object is decoded from ``data`` when first read."""

    __slots__ = ("_source", "key")

    def __init__(self, key: tuple[str, str], data: bytes, decode: Decode) -> None:
        self._hold(key, data, decode)
        _DELETE_STATE_UNKNOWN.__set__(self, False)


def event_object(event: Event) -> Any:
    """The object an event is about (the new object for updates)."""
    return event.object_new if isinstance(event, UpdateEvent) else event.object
