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
- watches run with ``allowWatchBookmarks=true``; bookmarks only advance the resourceVersion; a
  watch that ends or breaks is re-opened from the last resourceVersion seen, so no event is lost
  or repeated; ``410`` → relist;
- stall detection (the role of client-go's HTTP/2 ``ReadIdleTimeout``/``PingTimeout`` health
  check, done per watch so it also covers HTTP/1.1 and any
  :class:`~pyctrl.client.watch.ListerWatcher`): every watch asks the apiserver to end it after
  ``timeoutSeconds`` = ``(stall_timeout - grace) * [0.8, 1]`` (``grace`` = ``max(2,
  stall_timeout / 6)``: 25 s at most with the default 30 s), which a healthy apiserver does on
  time, bookmarking it 2 s before; a watch still open ``timeoutSeconds + grace`` after it was
  requested is taken as frozen — a half-open connection that neither delivers nor closes — and
  abandoned. Either way the next watch starts at once from the last resourceVersion (no list),
  so a frozen watch is replaced at most ``stall_timeout`` seconds after it was opened, whenever
  the freeze began. The cost on a healthy apiserver is one watch request per informer every
  20-25 s (a watch resumed from a recent resourceVersion is served from the apiserver's watch
  cache). The streaming list keeps a long (5-10 minute) ``timeoutSeconds``, so a large one can
  finish, and counts as stalled after ``stall_timeout`` seconds without an event; it is closed at
  its initial-events-end bookmark and the watch goes on in a request of its own;
- ``pyctrl_watch_restarts_total{kind, cause}`` counts re-opened watches by cause: ``timeout`` (the
  apiserver ended it on time: the healthy case), ``stall``, ``gone`` (410: relist), ``error``;
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
import math
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client import Counter

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
from pyctrl.metrics import once, registry
from pyctrl.workqueue import Clock, RealClock, Timer

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "MIN_STALL_TIMEOUT",
    "Apply",
    "Backoff",
    "Delete",
    "Init",
    "InitDone",
    "InitPage",
    "WatchStalled",
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
#: Seconds after which a watch that neither ended nor delivered counts as frozen (module docstring).
DEFAULT_STALL_TIMEOUT = 30.0
#: The smallest ``stall_timeout``: a grace of 2 s plus the apiserver's smallest timeout, 1 s.
MIN_STALL_TIMEOUT = 3.0
Cause = Literal["timeout", "stall", "gone", "error"]


@once
def _restarts_family() -> Counter:
    return Counter(
        "pyctrl_watch_restarts_total",
        "Watches re-opened, by kind and cause: timeout (ended by the apiserver on time, the healthy "
        "case), stall (frozen: neither ended nor delivered in time), gone (410: relist), error.",
        ("kind", "cause"),
        registry=registry,
    )


class WatchStalled(RequestTimeout):
    """A watch neither ended nor delivered in time: its connection is taken as frozen."""


async def _bounded(
    stream: AsyncIterator[RawEvent], clock: Clock, *, deadline: float | None, idle: float | None
) -> AsyncIterator[RawEvent]:
    """``stream``, raising :class:`WatchStalled` once ``clock`` reaches ``deadline`` or a wait for
    the next event has lasted ``idle`` seconds (either may be ``None``: no such bound).

    One timer per stream, moved on only when it fires (an event costs one clock read, not a timer):
    it cancels the task iterating the stream if it is waiting then; a deadline reached between two
    waits is raised at the next one. Only the waits are timed, never the consumer's own work."""
    task = asyncio.current_task()
    assert task is not None
    waiting_since: float | None = None  # when the wait in progress began; None between waits
    expired: str | None = None  # why the stream expired, once it has
    timer: Timer | None = None

    def due() -> float:
        at = math.inf if deadline is None else deadline
        if idle is not None:
            at = min(at, (waiting_since if waiting_since is not None else clock.now()) + idle)
        return at

    def check() -> None:
        nonlocal timer, expired
        now = clock.now()
        if deadline is not None and now >= deadline:
            expired = "did not end in time"
        elif idle is not None and waiting_since is not None and now >= waiting_since + idle:
            expired = f"no event or bookmark for {idle:g} s"
        else:  # an event came since: due again from the wait in progress (or the next)
            timer = clock.call_at(due(), check)
            return
        if waiting_since is not None:
            task.cancel()

    if deadline is not None or idle is not None:
        timer = clock.call_at(due(), check)
    try:
        while True:
            if expired is not None:
                raise WatchStalled(f"watch stalled: {expired}")
            cancelling = task.cancelling()
            waiting_since = clock.now()
            try:
                event = await anext(stream)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError as exc:
                if expired is not None and task.uncancel() <= cancelling:
                    raise WatchStalled(f"watch stalled: {expired}") from exc
                raise
            finally:
                waiting_since = None
            yield event
    finally:
        if timer is not None:
            timer.cancel()
        if hasattr(stream, "aclose"):
            await stream.aclose()


class Watcher:
    """Lists and watches through ``lister_watcher``; iterate :meth:`events` (see module docstring).

    ``backoff.clock`` also times the watches' stall deadlines."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        page_size: int = 500,
        watch_list: bool = True,
        backoff: Backoff | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
        name: str = "",
    ) -> None:
        if not stall_timeout >= MIN_STALL_TIMEOUT:
            raise ValueError(f"stall_timeout must be at least {MIN_STALL_TIMEOUT:g} s, got {stall_timeout}")
        self._lw = lister_watcher
        self.stall_timeout = stall_timeout
        #: How late after its ``timeoutSeconds`` a watch may end before it counts as frozen.
        self.grace = max(2.0, stall_timeout / 6)
        self._page_size = page_size
        self.watch_list = watch_list
        self._backoff = backoff or Backoff()
        self._clock = self._backoff.clock
        self._name = name
        self.state = WatcherState.EMPTY
        #: The resourceVersion the next watch starts from (last listed, event or bookmark).
        self.resource_version = ""
        self._relist_rv = "0"
        self._continue: str | None = None
        self._stream: AsyncIterator[RawEvent] | None = None
        #: The error of the last failed list or watch; None once one succeeds (module docstring).
        self.last_error: KubernetesError | None = None
        self._restarts: dict[Cause, Counter] = {}

    def _restarted(self, cause: Cause) -> None:
        child = self._restarts.get(cause)
        if child is None:
            child = self._restarts[cause] = _restarts_family().labels(self._name, cause)
        child.inc()

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
                except WatchStalled as exc:  # it took stall_timeout to tell: re-open at once
                    self.last_error = exc
                    self._restarted("stall")
                    await self._close_stream()
                    self._after_error(exc)
                    log.warning(
                        "%s: %s; re-watching from resourceVersion %r", self._name, exc, self.resource_version
                    )
                except Gone as exc:
                    self._restarted("gone")
                    log.info("%s: %s; relisting", self._name, exc)
                    await self._close_stream()
                    self._relist_rv, self.state = "", WatcherState.EMPTY
                except KubernetesError as exc:
                    self.last_error = exc
                    if self.state in (WatcherState.WATCHING, WatcherState.INITIAL_WATCH):
                        self._restarted("error")
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

    def _open(self, *, resource_version: str, send_initial_events: bool = False) -> AsyncIterator[RawEvent]:
        """A watch bounded as the module docstring says: a streaming list by its silence, any
        other watch by its end, due ``grace`` after its ``timeoutSeconds``."""
        if send_initial_events:
            timeout = int(300 * (1 + random.random()))  # client-go's: a long list may finish
            deadline, idle = None, self.stall_timeout
        else:
            timeout = max(1, int((self.stall_timeout - self.grace) * (0.8 + 0.2 * random.random())))
            deadline, idle = self._clock.now() + timeout + self.grace, None
        stream = self._lw.watch(
            resource_version=resource_version,
            timeout_seconds=timeout,
            send_initial_events=send_initial_events,
        )
        return _bounded(stream, self._clock, deadline=deadline, idle=idle)

    async def _step(self) -> AsyncIterator[WatcherEvent]:
        match self.state:
            case WatcherState.EMPTY:
                log.debug("%s: listing (%s)", self._name, "streaming" if self.watch_list else "paged")
                yield Init()
                self._continue = None
                if self.watch_list:
                    self._stream = self._open(resource_version="", send_initial_events=True)
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
                self._stream = self._open(resource_version=self.resource_version)
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
                    # the watch goes on in a request of its own, with the short timeout
                    await self._close_stream()
                    self.state = WatcherState.INIT_LISTED
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
        self._restarted("timeout")
        self.state = WatcherState.INIT_LISTED


class _StreamEnded(KubernetesError):
    """The initial stream closed early (retried with backoff)."""
