"""The controller: sources → workqueue → workers → reconciler (controller-runtime
``pkg/internal/controller``).

Guarantees:
- a request is never reconciled by two workers at once, and an event during a reconcile causes
  exactly one more reconcile (the workqueue's guarantees);
- ``max_concurrent_reconciles`` workers (default 1) run once every syncing source has synced,
  within ``cache_sync_timeout`` (default 120 s) or ``start`` fails naming the sources;
- :meth:`Controller.warm_up` (controller-runtime's ``Warmup``, run by the manager before leader
  election) starts the sources without workers: the cache lists and watches and requests queue
  up, but nothing is reconciled until :meth:`Controller.start`, which then neither starts the
  sources again nor waits for a list; sources are started once whichever comes first;
- each outcome is handled as in the table of :mod:`pyctrl.reconcile`; additionally a ``Conflict``
  from the apiserver (a stale read) is requeued with backoff and counted as ``requeue``, logged at
  info level rather than as an error (REFERENCE, operator rules);
- an exception never kills a worker: it is logged with its traceback and counted
  (``reconcile_errors_total``; programming errors such as ``TypeError``/``KeyError``/
  ``AttributeError`` and a non-``Result`` return value also count in ``reconcile_panics_total``,
  the Python analogue of a recovered Go panic);
- ``reconciliation_timeout`` cancels a reconcile that runs too long (``reconcile_timeouts_total``);
- requeues (``requeue_after`` and rate-limited retries), the reconciliation timeout and the cache
  sync timeout are all timed on ``clock`` (a :class:`~pyctrl.workqueue.Clock`; the real one by
  default, a ``FakeClock`` in tests), which is also the queue's;
- every log line of a reconcile carries controller, namespace, name, reconcile_id and *trigger*:
  what caused it (``"update Pod ns/redis-0"``, ``"requeue"`` for timed and error requeues); the
  reconciler gets the same bound logger from :func:`pyctrl.log.from_context`;
- on stop, sources are stopped, the queue is shut down, in-flight reconciles finish and queued
  requests not yet started are dropped (the manager bounds this with its graceful-shutdown
  timeout, then cancels).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
import typing
from collections.abc import Sequence
from typing import Any

from pyctrl import trace as _trace
from pyctrl._deadline import done_by
from pyctrl.client.errors import Conflict
from pyctrl.controller._metrics import ControllerMetrics
from pyctrl.event import Event, event_key, event_type
from pyctrl.handler import RequestQueue
from pyctrl.log import Logger, bind_to_context, get_logger
from pyctrl.reconcile import Reconciler, Request, Result, TerminalError
from pyctrl.source import Source, SyncingSource
from pyctrl.workqueue import Clock, RateLimiter, RateLimitingQueue, RealClock, ShutDown

__all__ = ["Controller", "ControllerError"]

#: Exceptions counted as "panics": bugs in the reconciler rather than failures of the world.
_PANIC_TYPES = (
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    NameError,
    AssertionError,
    ZeroDivisionError,
    RecursionError,
    NotImplementedError,
)


class ControllerError(Exception):
    """A controller was misconfigured or could not start."""


def validate_reconciler(name: str, reconciler: object) -> Reconciler:
    """Fail at start-up, not at the first event, when ``reconciler`` cannot be a Reconciler."""
    method = getattr(reconciler, "reconcile", None)
    if method is None or not inspect.iscoroutinefunction(method):
        raise ControllerError(
            f"controller {name!r}: {type(reconciler).__name__} needs "
            "'async def reconcile(self, request: Request) -> Result'"
        )
    try:
        returns = typing.get_type_hints(method).get("return", Result)
    except Exception:  # unresolvable annotations: checked per call instead
        returns = Result
    if not (isinstance(returns, type) and issubclass(returns, Result)):
        raise ControllerError(
            f"controller {name!r}: {type(reconciler).__name__}.reconcile is annotated to return "
            f"{returns!r}; it must return pyctrl.Result"
        )
    return typing.cast(Reconciler, reconciler)


class _TriggerQueue:
    """The queue a handler sees for one event: records the event as the trigger of each add."""

    __slots__ = ("_controller", "_trigger")

    def __init__(self, controller: Controller, trigger: str) -> None:
        self._controller = controller
        self._trigger = trigger

    def add(self, item: Request, *, priority: int = 0) -> None:
        self._controller.triggers[item] = self._trigger
        self._controller.queue.add(item, priority=priority)


class Controller:
    """Runs ``reconciler`` for requests produced by its watched sources. A manager runnable."""

    needs_leader_election = True

    def __init__(
        self,
        name: str,
        reconciler: object,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        reconciliation_timeout: float | None = None,
        cache_sync_timeout: float = 120.0,
        clock: Clock | None = None,
    ) -> None:
        if not name:
            raise ControllerError("a controller needs a non-empty name")
        if max_concurrent_reconciles < 1:
            raise ControllerError(f"controller {name!r}: max_concurrent_reconciles must be >= 1")
        self.name = name
        self.reconciler = validate_reconciler(name, reconciler)
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.reconciliation_timeout = reconciliation_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.clock: Clock = clock if clock is not None else RealClock()
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(rate_limiter, name=name, clock=self.clock)
        self.triggers: dict[Request, str] = {}
        self.metrics = ControllerMetrics.of(name)
        self.log: Logger = get_logger("pyctrl.controller", controller=name)
        self._sources: list[Source] = []
        self._started = False
        self._stopping = False
        self._sources_started = False
        self._sources_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Controller({self.name!r})"

    # -- wiring ------------------------------------------------------------------------------
    def watch(self, source: Source) -> None:
        """Add a source (before ``start``)."""
        if not isinstance(source, Source):
            raise ControllerError(f"controller {self.name!r}: not a source: {source!r}")
        if self._started or self._sources_started:
            raise ControllerError(f"controller {self.name!r}: add sources before the controller starts")
        self._sources.append(source)

    def for_event(self, event: Event, source: str) -> RequestQueue:
        ns, name = event_key(event)
        return _TriggerQueue(self, f"{event_type(event)} {source} {ns + '/' if ns else ''}{name}")

    # -- running -----------------------------------------------------------------------------
    async def start(self, stop: asyncio.Event) -> None:
        """Start sources, wait for their sync, run workers until ``stop`` is set, then drain."""
        if self._started:
            raise ControllerError(f"controller {self.name!r} was already started")
        self._started = True
        self.metrics.max_concurrent = self.max_concurrent_reconciles
        workers: list[asyncio.Task[None]] = []
        try:
            await self._start_sources()
            await self._wait_for_sync(self._sources)
            self.log.info("Starting workers", worker_count=self.max_concurrent_reconciles)
            workers = [
                asyncio.create_task(self._worker(), name=f"pyctrl-{self.name}-worker-{i}")
                for i in range(self.max_concurrent_reconciles)
            ]
            await stop.wait()
            self.log.info("Shutdown signal received, waiting for all workers to finish")
        finally:
            self._stopping = True
            await self._stop_sources()
            self.queue.shut_down()
            try:
                await asyncio.gather(*workers)
            finally:
                for w in workers:
                    w.cancel()
            self.log.info("All workers finished")

    async def warm_up(self, stop: asyncio.Event) -> None:
        """Start the sources before leading (no workers); until ``stop``. If the controller never
        started meanwhile, its sources are stopped then."""
        await self._start_sources()
        self.log.info("Warmed up: sources started, waiting for leadership")
        await stop.wait()
        if not self._started:
            await self._stop_sources()

    async def _start_sources(self) -> None:
        async with self._sources_lock:
            if self._sources_started:
                return
            self._sources_started = True
            for source in list(self._sources):
                await source.start(self)

    async def _stop_sources(self) -> None:
        async with self._sources_lock:
            for source in self._sources:
                await source.stop()

    async def _wait_for_sync(self, sources: Sequence[Source]) -> None:
        syncing = [s for s in sources if isinstance(s, SyncingSource)]
        synced = asyncio.gather(*(s.wait_for_sync() for s in syncing))
        if not await done_by(self.clock, self.clock.now() + self.cache_sync_timeout, synced):
            raise ControllerError(
                f"controller {self.name!r}: timed out after {self.cache_sync_timeout}s waiting for "
                f"caches to sync: {', '.join(map(repr, syncing))}"
            )
        synced.result()

    async def _worker(self) -> None:
        """controller-runtime ``processNextWorkItem`` in a loop: get, handle, done."""
        while not self._stopping:
            try:
                request, priority = await self.queue.get_with_priority()
            except ShutDown:
                return
            if _trace.ENABLED:
                _trace.picked(self.queue, request, priority)
            try:
                if not self._stopping:  # queued but not started: left for the next leader
                    await self._reconcile_handler(request, priority)
            finally:
                self.queue.done(request)

    async def _reconcile_handler(self, request: Request, priority: int) -> None:
        log = self.log.with_values(
            namespace=request.namespace,
            name=request.name,
            reconcile_id=f"{random.getrandbits(48):012x}",  # as uuid4().hex[:12], no os.urandom call
            trigger=self.triggers.pop(request, "requeue"),
        )
        debug = log.is_enabled_for(logging.DEBUG)
        if debug:
            log.debug("Reconciling")
        m = self.metrics
        m.active += 1
        started = time.perf_counter()
        try:
            with bind_to_context(log):
                outcome = await self._reconcile(request)
        finally:
            m.active -= 1
            m.time.observe(time.perf_counter() - started)
        if _trace.ENABLED:
            _trace.reconciled(self.name, request, outcome, time.perf_counter() - started)
        self._handle_outcome(request, priority, outcome, log)
        if debug:
            log.debug("Reconcile done", duration_s=round(time.perf_counter() - started, 6))

    def _handle_outcome(
        self, request: Request, priority: int, outcome: Result | BaseException, log: Logger
    ) -> None:
        """The result table of :mod:`pyctrl.reconcile`: one queue call, one metric, one log line."""
        q, m = self.queue, self.metrics
        match outcome:
            case TerminalError():
                q.forget(request)
                m.errors += 1
                m.terminal += 1
                m.results["error"] += 1
                log.error("Reconciler error (terminal, not retried)", exc_info=outcome)
            case Conflict():
                q.add_rate_limited(request, priority=priority)
                m.results["requeue"] += 1
                log.info("Conflict (stale read), requeuing", error=str(outcome))
            case BaseException():
                q.add_rate_limited(request, priority=priority)
                m.errors += 1
                m.results["error"] += 1
                log.error("Reconciler error", exc_info=outcome)
            case Result(requeue_after=after) if after:
                q.forget(request)
                q.add_after(request, after, priority=outcome.priority or 0)
                m.results["requeue_after"] += 1
            case Result(requeue=True):
                q.add_rate_limited(request, priority=outcome.priority or 0)
                m.results["requeue"] += 1
            case _:
                q.forget(request)
                m.results["success"] += 1

    async def _reconcile(self, request: Request) -> Result | BaseException:
        """Run the reconciler once; return its Result or the exception it raised."""
        timeout = self.reconciliation_timeout
        try:
            if timeout is None:
                result: Any = await self.reconciler.reconcile(request)
            else:  # the reconcile runs as a task cancelled at the deadline on the clock
                attempt = asyncio.ensure_future(self.reconciler.reconcile(request))
                if not await done_by(self.clock, self.clock.now() + timeout, attempt):
                    self.metrics.timeouts += 1
                    return TimeoutError(f"reconcile exceeded the reconciliation timeout ({timeout}s)")
                result = attempt.result()
        except Exception as exc:
            if isinstance(exc, _PANIC_TYPES):
                self.metrics.panics += 1
            return exc
        if not isinstance(result, Result):
            self.metrics.panics += 1
            return TypeError(f"reconcile returned {type(result).__name__}, expected pyctrl.Result")
        return result
