"""Where a controller's events come from (controller-runtime ``pkg/source``).

- ``Kind(cache, kind, handler, predicates)``: watches ``kind`` through the cache's shared informer
  (so a kind watched by several controllers is listed and watched once) and turns informer
  notifications into events: ``CreateEvent`` (``is_in_initial_list`` for the initial list),
  ``UpdateEvent``, ``DeleteEvent`` (``delete_state_unknown`` for a tombstone). It is a syncing
  source: the controller waits for its informer to sync before starting workers.
- ``Channel(events, handler, predicates)``: ``GenericEvent``s put on an ``asyncio.Queue`` by code
  outside the cluster (a health prober, a timer) reach the handler.

A source dispatches each event through its predicates, then calls its handler with a queue the
controller provides per event (``EventSink.for_event``), so the controller can log what triggered
each reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pyctrl import trace as _trace
from pyctrl.cache.cache import Informers, KindInformer
from pyctrl.cache.informer import DeletedFinalStateUnknown, Registration
from pyctrl.cache.reflector import Change
from pyctrl.client.scheme import Kind as KindType
from pyctrl.client.scheme import kind_gvk
from pyctrl.event import (
    CachedCreateEvent,
    CachedDeleteEvent,
    CachedUpdateEvent,
    CreateEvent,
    Decode,
    DeleteEvent,
    Event,
    GenericEvent,
    UpdateEvent,
)
from pyctrl.handler import EventHandler, RequestQueue, _OwnerHandler, dispatch
from pyctrl.predicate import Predicate, PredicateLike, as_predicate, passes

__all__ = ["Channel", "EventSink", "Kind", "Source", "SyncingSource"]


class EventSink(Protocol):
    """The controller side of a source: a queue for the requests one event causes."""

    def for_event(self, event: Event, source: str) -> RequestQueue: ...


@runtime_checkable
class Source(Protocol):
    async def start(self, sink: EventSink) -> None:
        """Begin delivering events to ``sink``; return promptly (work continues in the background)."""

    async def stop(self) -> None:
        """Stop delivering events."""


@runtime_checkable
class SyncingSource(Source, Protocol):
    async def wait_for_sync(self) -> None:
        """Return once the source has delivered its initial state."""


class _Dispatcher:
    def __init__(self, handler: EventHandler, predicates: Sequence[PredicateLike], description: str) -> None:
        if not isinstance(handler, EventHandler):
            raise TypeError(f"{description}: not an event handler: {handler!r}")
        self.handler = handler
        self.predicates: list[Predicate] = [as_predicate(p) for p in predicates]
        self.description = description
        self.sink: EventSink | None = None

    def emit(self, event: Event) -> None:
        if self.sink is None:
            return
        if _trace.ENABLED:
            _trace.predicates(self.description, event, self.predicates)
        if self.predicates and not all(passes(p, event) for p in self.predicates):
            return
        dispatch(self.handler, event, self.sink.for_event(event, self.description))


class Kind:
    """Events for one kind from the cache's shared informer."""

    def __init__(
        self,
        cache: Informers,
        kind: KindType,
        handler: EventHandler,
        predicates: Sequence[PredicateLike] = (),
    ) -> None:
        self.cache = cache
        self.kind = kind
        self._dispatch = _Dispatcher(handler, predicates, kind_gvk(kind).kind)
        self._informer: KindInformer | None = None
        self._registration: list[Registration] | None = None

    def __repr__(self) -> str:
        return f"Kind({kind_gvk(self.kind)})"

    # informer handler interface ---------------------------------------------------------------
    def on_change(self, change: Change, decode: Decode) -> None:
        """The informer's change, its objects decoded only when a predicate or handler reads them."""
        if change.type == "add":
            assert change.new is not None
            self._dispatch.emit(CachedCreateEvent(change.key, change.new, decode, change.in_initial_list))
        elif change.type == "update":
            assert change.old is not None
            assert change.new is not None
            self._dispatch.emit(CachedUpdateEvent(change.key, change.old, change.new, decode))
        else:
            assert change.old is not None
            if change.tombstone:
                ns, name = change.key
                self.on_delete(DeletedFinalStateUnknown(f"{ns}/{name}" if ns else name, decode(change.old)))
            else:
                self._dispatch.emit(CachedDeleteEvent(change.key, change.old, decode))

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._dispatch.emit(CreateEvent(obj, is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self._dispatch.emit(UpdateEvent(old, new))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self._dispatch.emit(DeleteEvent(obj.obj, delete_state_unknown=True))
        else:
            self._dispatch.emit(DeleteEvent(obj))

    # Source ---------------------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        handler = self._dispatch.handler
        if isinstance(handler, _OwnerHandler):
            await handler.resolve_scope(self.cache.mapping)
        self._dispatch.sink = sink
        self._informer = await self.cache.get_informer(self.kind)
        self._registration = self._informer.add_event_handler(self)

    async def wait_for_sync(self) -> None:
        if self._informer is None:
            raise RuntimeError(f"{self!r} was not started")
        await self._informer.wait_for_sync()

    async def stop(self) -> None:
        self._dispatch.sink = None
        if self._informer is not None and self._registration is not None:
            await self._informer.remove_event_handler(self._registration)
            self._registration = None


class Channel:
    """``GenericEvent``s from an ``asyncio.Queue`` fed by code outside the cluster."""

    def __init__(
        self,
        events: asyncio.Queue[GenericEvent],
        handler: EventHandler,
        predicates: Sequence[PredicateLike] = (),
    ) -> None:
        self.events = events
        self._dispatch = _Dispatcher(handler, predicates, "channel")
        self._task: asyncio.Task[None] | None = None

    async def start(self, sink: EventSink) -> None:
        self._dispatch.sink = sink
        self._task = asyncio.create_task(self._run(), name="pyctrl-channel-source")

    async def _run(self) -> None:
        while True:
            event = await self.events.get()
            if not isinstance(event, GenericEvent):
                event = GenericEvent(event)
            self._dispatch.emit(event)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
