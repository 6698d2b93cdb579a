"""The shared informer: watcher → reflector → store, plus event handlers.

Mirrors client-go ``tools/cache.SharedIndexInformer`` (``AddEventHandler`` returning a
registration with ``HasSynced``, ``processorListener`` buffering per handler, resync,
``DeletedFinalStateUnknown``) as controller-runtime's cache uses it.

Guarantees:

- handlers see each object's changes in the order the apiserver made them: ``on_add(obj,
  is_in_initial_list)``, ``on_update(old, new)``, ``on_delete(obj_or_tombstone)``; an object
  deleted while the watch was down is reported as ``on_delete(DeletedFinalStateUnknown(key, obj))``
  carrying its last cached state;
- every handler has its own unbounded buffer and task, so a slow handler delays nobody else and
  never blocks the watch; handler methods may be plain functions or coroutines; an exception in
  a handler is logged and the handler keeps receiving events;
- a handler added after the initial sync first receives the current content as adds with
  ``is_in_initial_list=True``; its registration's ``has_synced()`` turns true once it has
  processed them (the informer's ``has_synced()`` once the store holds the first full list);
- each handler gets freshly decoded objects (typed for a typed kind, dicts otherwise), never the
  cached bytes' shared state; a handler with an ``on_change(change, decode)`` method (pyctrl's
  ``Kind`` source) gets the :class:`Change` itself and the decoder instead, and decodes only what
  it reads;
- with ``resync_period`` set, every cached object is redelivered as ``on_update(obj, obj)`` each
  period (±10 % jitter).
- a frozen watch is replaced within ``watch_stall_timeout`` seconds of its opening, resumed from
  its last resourceVersion (:mod:`pyctrl.cache.watcher`);
- ``last_error`` says why it is not synced (or not watching): the error of its last failed list
  or watch, ``None`` once one succeeds (:mod:`pyctrl.cache.watcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson

from pyctrl import trace as _trace
from pyctrl.cache.reflector import Change, Reflector, Transform, strip_managed_fields
from pyctrl.cache.store import IndexFunc, Store
from pyctrl.cache.watcher import DEFAULT_STALL_TIMEOUT, Backoff, Watcher
from pyctrl.client.errors import KubernetesError
from pyctrl.client.gvk import GroupVersionKind
from pyctrl.client.objects import is_metadata_only
from pyctrl.client.scheme import Kind, kind_gvk
from pyctrl.client.watch import ListerWatcher

__all__ = [
    "DeletedFinalStateUnknown",
    "HandlerFuncs",
    "Informer",
    "Registration",
    "ResourceEventHandler",
    "decoder_for",
]

log = logging.getLogger("pyctrl.cache.informer")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown(Generic[T]):
    """client-go's tombstone: ``obj`` was deleted while disconnected; ``obj`` is its last known state."""

    key: str
    obj: T


class ResourceEventHandler(Protocol):
    """What ``add_event_handler`` accepts; each method may return an awaitable."""

    def on_add(self, obj: Any, is_in_initial_list: bool) -> Awaitable[None] | None: ...

    def on_update(self, old: Any, new: Any) -> Awaitable[None] | None: ...

    def on_delete(self, obj: Any) -> Awaitable[None] | None: ...


@dataclass
class HandlerFuncs:
    """client-go ``ResourceEventHandlerFuncs``: a handler from optional callables."""

    add: Callable[[Any, bool], Awaitable[None] | None] | None = None
    update: Callable[[Any, Any], Awaitable[None] | None] | None = None
    delete: Callable[[Any], Awaitable[None] | None] | None = None

    def on_add(self, obj: Any, is_in_initial_list: bool) -> Awaitable[None] | None:
        return self.add(obj, is_in_initial_list) if self.add else None

    def on_update(self, old: Any, new: Any) -> Awaitable[None] | None:
        return self.update(old, new) if self.update else None

    def on_delete(self, obj: Any) -> Awaitable[None] | None:
        return self.delete(obj) if self.delete else None


def decoder_for(kind: Kind) -> Callable[[bytes], Any]:
    """How cached bytes become an object of ``kind`` (TypeMeta restored for unstructured)."""
    if isinstance(kind, GroupVersionKind):
        head = {"apiVersion": kind.api_version, "kind": kind.kind}
        return lambda data: {**head, **orjson.loads(data)}
    return kind.model_validate_json


_SYNCED = object()


class Registration:
    """What ``add_event_handler`` returns (client-go ``ResourceEventHandlerRegistration``)."""

    def __init__(self, handler: ResourceEventHandler, decode: Callable[[bytes], Any], name: str) -> None:
        self.handler = handler
        self._decode = decode
        #: the handler takes changes undecoded (``on_change(change, decode)``)
        self._on_change: Callable[[Change, Callable[[bytes], Any]], Awaitable[None] | None] | None = getattr(
            handler, "on_change", None
        )
        self._queue: deque[Change | object] = deque()
        self._wake = asyncio.Event()
        self._synced = False
        self._task: asyncio.Task[None] | None = None
        self._name = name

    def has_synced(self) -> bool:
        """True once this handler has processed the informer's initial content."""
        return self._synced

    def push(self, item: Change | object) -> None:
        self._queue.append(item)
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"handler:{self._name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            item = self._queue.popleft()
            if item is _SYNCED:
                self._synced = True
                continue
            assert isinstance(item, Change)
            try:
                result = self._dispatch(item)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: event handler failed on %s %s/%s", self._name, item.type, *item.key)

    def _dispatch(self, change: Change) -> Awaitable[None] | None:
        h, decode = self.handler, self._decode
        if _trace.ENABLED:
            _trace.delivered(self._name, change, h)
        if self._on_change is not None:
            return self._on_change(change, decode)
        if change.type == "add":
            assert change.new is not None
            return h.on_add(decode(change.new), change.in_initial_list)
        if change.type == "update":
            assert change.old is not None
            assert change.new is not None
            return h.on_update(decode(change.old), decode(change.new))
        assert change.old is not None
        obj = decode(change.old)
        if change.tombstone:
            ns, name = change.key
            obj = DeletedFinalStateUnknown(f"{ns}/{name}" if ns else name, obj)
        return h.on_delete(obj)


class Informer:
    """Watches one kind (with fixed namespace/selectors) into a store and fans out changes."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        kind: Kind,
        *,
        transform: Transform | None = strip_managed_fields,
        watch_list: bool = True,
        page_size: int = 500,
        resync_period: float | None = None,
        backoff: Backoff | None = None,
        watch_stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> None:
        self.kind = kind
        self.name = kind.__name__ if is_metadata_only(kind) else str(kind_gvk(kind).kind)
        self.decode = decoder_for(kind)
        self.store = Store(self.decode)
        self.watcher = Watcher(
            lister_watcher,
            page_size=page_size,
            watch_list=watch_list,
            backoff=backoff,
            stall_timeout=watch_stall_timeout,
            name=self.name,
        )
        self.reflector = Reflector(self.store, self.watcher, notify=None, transform=transform)
        self._resync_period = resync_period
        self._registrations: list[Registration] = []
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- handlers -------------------------------------------------------------------------------
    def add_event_handler(self, handler: ResourceEventHandler, *, kind: Kind | None = None) -> Registration:
        """Register ``handler``; objects are decoded as ``kind`` (default: the informer's kind)."""
        reg = Registration(handler, decoder_for(kind) if kind is not None else self.decode, self.name)
        if self.has_synced():
            for key in sorted(self.store.all_keys()):
                data = self.store.get(*key)
                assert data is not None
                reg.push(Change("add", key, None, data, in_initial_list=True))
            reg.push(_SYNCED)
        self._registrations.append(reg)
        self.reflector.notify = self._fan_out
        if self._tasks:
            reg.start()
        return reg

    async def remove_event_handler(self, registration: Registration) -> None:
        if registration in self._registrations:
            self._registrations.remove(registration)
        if not self._registrations:
            self.reflector.notify = None
        await registration.stop()

    def _fan_out(self, change: Change) -> None:
        for reg in self._registrations:
            reg.push(change)

    def add_index(self, name: str, fn: Callable[[Any], list[str]]) -> None:
        """Index stored objects by ``fn(obj)`` (obj decoded as the informer's kind)."""
        func: IndexFunc = fn
        self.store.add_index(name, func)

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Informer:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def start(self) -> None:
        """Start watching (in the running loop); idempotent."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._run(), name=f"informer:{self.name}"))
        if self._resync_period:
            self._tasks.append(
                loop.create_task(self._resync(self._resync_period), name=f"resync:{self.name}")
            )
        for reg in self._registrations:
            reg.start()

    async def stop(self) -> None:
        """Stop watching and every handler task; the store keeps its last content."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for reg in self._registrations:
            await reg.stop()

    async def _run(self) -> None:
        async for event in self.watcher.events():
            self.reflector.apply(event)
            if self.reflector.synced and not self._synced.is_set():
                self._synced.set()
                for reg in self._registrations:
                    reg.push(_SYNCED)

    async def _resync(self, period: float) -> None:
        while True:
            await asyncio.sleep(period * (0.9 + 0.2 * random.random()))
            if not self.has_synced():
                continue
            for key in list(self.store.all_keys()):
                data = self.store.get(*key)
                if data is not None:
                    self._fan_out(Change("update", key, data, data))

    def has_synced(self) -> bool:
        """True once the store holds the first complete listing."""
        return self._synced.is_set()

    @property
    def last_error(self) -> KubernetesError | None:
        """The error of the last failed list or watch; ``None`` once one succeeded."""
        return self.watcher.last_error

    async def wait_for_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (client-go API)
        """Wait until synced; ``False`` if ``timeout`` seconds pass first."""
        if self._synced.is_set():  # every cached read asks: skip arming a timer
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True
