"""The watcher: list then watch one kind forever, as an explicit state machine emitting events.

Mirrors client-go ``tools/cache.Reflector.ListAndWatch`` (and the shape of kube-rs
``runtime::watcher``: states ``Empty → InitPage/InitialWatch → InitListed → Watching``, events
``Init``/``InitPage``/``InitDone``/``Apply``/``Delete``). It only talks to a
:class:`~pyctrl.client.watch.ListerWatcher`; the reflector turns its events into store writes.

Guarantees:

- the first list uses ``resourceVersion="0"`` (served from the apiserver's watch cache), paged by
  ``page_size``; a list after ``410 Gone``/``Expired`` uses ``resourceVersion=""`` (a consistent
  read), as does a list whose continue token expired mid-way;
- with ``watch_list=True`` the initial state comes from a streaming list (``sendInitialEvents``,
  ``resourceVersionMatch=NotOlderThan``) that ends at the bookmark annotated
  ``k8s.io/initial-events-end``; if the apiserver rejects it (400/403/405/422) the watcher falls
  back to paged lists for good;
- between ``Init`` and ``InitDone`` the events describe one complete, consistent listing; the
  consumer replaces its state at ``InitDone`` (so objects deleted while disconnected are found);
- watches run with ``allowWatchBookmarks=true`` and a random 5-10 minute ``timeoutSeconds``;
  bookmarks only advance the resourceVersion; a watch that ends or breaks is re-opened from the
  last resourceVersion seen, so no event is lost or repeated; ``410`` → relist;
- watch health: a watch that delivers neither an event nor a bookmark for ``idle_timeout``
  seconds (default 90: the apiserver bookmarks every watch about once a minute) is abandoned as
  stalled — a half-open connection that neither delivers nor closes — and re-opened (with the
  failure backoff) from the last resourceVersion; a stalled streaming list starts over. This is
  the role of client-go's HTTP/2 ``ReadIdleTimeout``/``PingTimeout`` health check, done per watch
  so it also covers HTTP/1.1 and any :class:`~pyctrl.client.watch.ListerWatcher`;
- failures back off 0.8 s, doubling to 30 s, with jitter, reset after 2 minutes without failure;
  the watcher never gives up (stop it by cancelling the task iterating it).
- ``last_error`` is the error of the last failed list or watch (what client-go hands its
  ``WatchErrorHandler``), e.g. ``Forbidden`` while RBAC denies the list; it is ``None`` before any
  failure and again once a listing completes or a watch delivers an event.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pyctrl import trace as _trace
from pyctrl.client.errors import (
    BadRequest,
    Forbidden,
    Gone,
    Invalid,
    KubernetesError,
    MethodNotAllowed,
    RequestTimeout,
)
from pyctrl.client.watch import INITIAL_EVENTS_END, ListerWatcher, RawEvent
from pyctrl.workqueue import Clock, RealClock

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "Apply",
    "Backoff",
    "Delete",
    "Init",
    "InitDone",
    "InitPage",
    "Watcher",
    "WatcherEvent",
    "WatcherState",
]

log = logging.getLogger("pyctrl.cache.watcher")


@dataclass(frozen=True, slots=True)
class Init:
    """A (re)list starts: the following ``InitPage`` events together form the full state."""


@dataclass(frozen=True, slots=True)
class InitPage:
    items: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class InitDone:
    """The listing is complete, consistent at ``resource_version``."""

    resource_version: str


@dataclass(frozen=True, slots=True)
class Apply:
    """An object was added or modified."""

    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delete:
    """An object was deleted (``object`` is its last state)."""

    object: dict[str, Any]


WatcherEvent = Init | InitPage | InitDone | Apply | Delete


class WatcherState(enum.Enum):
    EMPTY = "Empty"
    INIT_PAGE = "InitPage"
    INITIAL_WATCH = "InitialWatch"
    INIT_LISTED = "InitListed"
    WATCHING = "Watching"


@dataclass
class Backoff:
    """Jittered exponential backoff (client-go ``wait.Backoff`` as the reflector configures it)."""

    initial: float = 0.8
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 1.0
    reset_after: float = 120.0
    clock: Clock = field(default_factory=RealClock)
    rand: Callable[[], float] = random.random
    _current: float = field(default=0.0, init=False)
    _last_failure: float | None = field(default=None, init=False)

    def next_delay(self) -> float:
        """The delay before the next attempt after a failure now."""
        now = self.clock.now()
        if self._last_failure is None or now - self._last_failure > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self.cap, self._current * self.factor)
        self._last_failure = now
        return self._current * (1.0 + self.jitter * self.rand())

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds on the backoff's clock."""
        await self.clock.sleep_until(self.clock.now() + delay)


_UNSUPPORTED = (BadRequest, Invalid, Forbidden, MethodNotAllowed)
#: Objects of a streaming list handed on together. Small on purpose: parsed dicts waiting in a
#: batch survive into older GC generations and trigger full collections (measured: batches of
#: 500 cost 2 full collections per 10,000 objects, batches of 20 none).
_STREAM_BATCH = 20
#: Seconds without an event or bookmark after which a watch counts as stalled (module docstring).
DEFAULT_IDLE_TIMEOUT = 90.0


async def _idle_bounded(stream: AsyncIterator[RawEvent], idle_timeout: float) -> AsyncIterator[RawEvent]:
    """``stream``, raising :class:`RequestTimeout` when a wait for its next event lasts
    ``idle_timeout`` s.

    ``asyncio.timeout`` around each wait would arm and cancel a timer per event; this keeps one
    timer, due ``idle_timeout`` after the current wait began and moved on only when it fires, so
    an event costs one clock read (the same bound: the wait in progress is what is timed)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    waiting_since: float | None = None  # when the wait in progress began; None between waits
    expired = False
    timer: asyncio.TimerHandle

    def check() -> None:
        nonlocal timer, expired
        if waiting_since is not None and loop.time() >= waiting_since + idle_timeout:
            expired = True
            task.cancel()
        else:  # an event came since: due idle_timeout after the wait in progress (or the next) began
            start = waiting_since if waiting_since is not None else loop.time()
            timer = loop.call_at(start + idle_timeout, check)

    timer = loop.call_at(loop.time() + idle_timeout, check)
    try:
        while True:
            cancelling = task.cancelling()
            waiting_since = loop.time()
            try:
                event = await anext(stream)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError as exc:
                if expired and task.uncancel() <= cancelling:
                    silent = f"no event or bookmark for {idle_timeout:g} s"
                    raise RequestTimeout(f"watch stalled: {silent}") from exc
                raise
            finally:
                waiting_since = None
            yield event
    finally:
        timer.cancel()
        if hasattr(stream, "aclose"):
            await stream.aclose()


class Watcher:
    """Lists and watches through ``lister_watcher``; iterate :meth:`events` (see module docstring)."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        page_size: int = 500,
        watch_list: bool = True,
        backoff: Backoff | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        name: str = "",
    ) -> None:
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive, got {idle_timeout}")
        self._lw = lister_watcher
        self.idle_timeout = idle_timeout
        self._page_size = page_size
        self.watch_list = watch_list
        self._backoff = backoff or Backoff()
        self._name = name
        self.state = WatcherState.EMPTY
        #: The resourceVersion the next watch starts from (last listed, event or bookmark).
        self.resource_version = ""
        self._relist_rv = "0"
        self._continue: str | None = None
        self._stream: AsyncIterator[RawEvent] | None = None
        #: The error of the last failed list or watch; None once one succeeds (module docstring).
        self.last_error: KubernetesError | None = None

    async def events(self) -> AsyncGenerator[WatcherEvent, None]:
        """The event stream; never ends on its own. Iterating again after a stop resumes: a watch
        from the last resourceVersion, or a fresh list if the stop came mid-list."""
        if self.state is WatcherState.WATCHING:
            self.state = WatcherState.INIT_LISTED
        elif self.state in (WatcherState.INIT_PAGE, WatcherState.INITIAL_WATCH):
            self.state = WatcherState.EMPTY
        try:
            while True:
                try:
                    async for event in self._step():
                        yield event
                except asyncio.CancelledError:
                    raise
                except Gone as exc:
                    log.info("%s: %s; relisting", self._name, exc)
                    await self._close_stream()
                    self._relist_rv, self.state = "", WatcherState.EMPTY
                except KubernetesError as exc:
                    self.last_error = exc
                    await self._close_stream()
                    self._after_error(exc)
                    delay = self._backoff.next_delay()
                    log.warning("%s: %s; retrying in %.1fs", self._name, exc, delay)
                    await self._backoff.sleep(delay)
        finally:
            await self._close_stream()

    def _after_error(self, exc: KubernetesError) -> None:
        if self.state is WatcherState.INITIAL_WATCH:
            if isinstance(exc, _UNSUPPORTED):
                log.info("%s: streaming list not available (%s); using paged lists", self._name, exc)
                self.watch_list = False
            self.state = WatcherState.EMPTY
        elif self.state is WatcherState.INIT_PAGE:
            self.state = WatcherState.EMPTY
        elif self.state is WatcherState.WATCHING:
            self.state = WatcherState.INIT_LISTED

    async def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and hasattr(stream, "aclose"):
            await stream.aclose()

    def _timeout(self) -> int:
        return int(300 * (1 + random.random()))

    def _open(
        self, *, resource_version: str, timeout_seconds: int, send_initial_events: bool = False
    ) -> AsyncIterator[RawEvent]:
        stream = self._lw.watch(
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            send_initial_events=send_initial_events,
        )
        return _idle_bounded(stream, self.idle_timeout)

    async def _step(self) -> AsyncIterator[WatcherEvent]:
        match self.state:
            case WatcherState.EMPTY:
                log.debug("%s: listing (%s)", self._name, "streaming" if self.watch_list else "paged")
                yield Init()
                self._continue = None
                if self.watch_list:
                    self._stream = self._open(
                        resource_version="", timeout_seconds=self._timeout(), send_initial_events=True
                    )
                    self.state = WatcherState.INITIAL_WATCH
                else:
                    self.state = WatcherState.INIT_PAGE
            case WatcherState.INIT_PAGE:
                try:
                    page = await self._lw.list(
                        resource_version=self._relist_rv, limit=self._page_size, continue_=self._continue
                    )
                except Gone:
                    if self._continue is None:
                        raise
                    self._relist_rv, self.state = "", WatcherState.EMPTY  # continue token expired
                    return
                yield InitPage(page.items)
                self._continue = page.continue_
                if page.continue_ is None:
                    self.resource_version = page.resource_version
                    self.state = WatcherState.INIT_LISTED
                    self.last_error = None
                    yield InitDone(page.resource_version)
            case WatcherState.INITIAL_WATCH:
                async for event in self._initial_watch():
                    yield event
            case WatcherState.INIT_LISTED:
                log.debug("%s: watching from resourceVersion %s", self._name, self.resource_version)
                self._stream = self._open(
                    resource_version=self.resource_version, timeout_seconds=self._timeout()
                )
                self.state = WatcherState.WATCHING
            case WatcherState.WATCHING:
                async for event in self._watching():
                    yield event

    async def _initial_watch(self) -> AsyncIterator[WatcherEvent]:
        assert self._stream is not None
        batch: list[dict[str, Any]] = []
        async for event in self._stream:
            if event.type == "BOOKMARK":
                meta = event.object.get("metadata") or {}
                if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                    if batch:
                        yield InitPage(batch)
                    self.resource_version = str(meta.get("resourceVersion", ""))
                    log.debug(
                        "%s: streaming list complete at resourceVersion %s", self._name, self.resource_version
                    )
                    self.state = WatcherState.WATCHING
                    self.last_error = None
                    yield InitDone(self.resource_version)
                    return
                continue
            if event.type == "ADDED":
                batch.append(event.object)
                if len(batch) >= _STREAM_BATCH:
                    yield InitPage(batch)
                    batch = []
            else:  # not a streaming list after all: the server ignored sendInitialEvents
                raise BadRequest({"message": f"unexpected {event.type} event during the initial stream"})
        raise _StreamEnded("streaming list ended before its initial-events-end bookmark")

    async def _watching(self) -> AsyncIterator[WatcherEvent]:
        assert self._stream is not None
        debug = log.isEnabledFor(logging.DEBUG)
        async for event in self._stream:
            self.last_error = None
            rv = (event.object.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            if debug:
                name = (event.object.get("metadata") or {}).get("name")
                log.debug("%s: %s %s %s", self._name, event.type, name, rv)
            if _trace.ENABLED:
                _trace.watch_event(self._name, event.type, event.object)
            match event.type:
                case "ADDED" | "MODIFIED":
                    yield Apply(event.object)
                case "DELETED":
                    yield Delete(event.object)
        await self._close_stream()  # server-side timeout: re-watch at once from resource_version
        self.state = WatcherState.INIT_LISTED


class _StreamEnded(KubernetesError):
    """The initial stream closed early (retried with backoff)."""
