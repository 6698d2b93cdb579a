"""The base work queue: dedup, never two workers on one item, priorities, shutdown.

Mirrors client-go ``util/workqueue/queue.go`` (``Typed`` queue: ``queue``/``dirty``/``processing``)
with the priorities of controller-runtime ``pkg/controller/priorityqueue`` (its default queue since
v0.23). asyncio is single-threaded, so every method runs atomically between ``await`` points: the
"condition variable" is a FIFO of waiting ``get`` futures, woken one per ready item.

Guarantees (the order of client-go's ``doc.go``):

- Fair: items are handed out by priority, higher first, and first in first out within a priority.
  An item whose priority is raised while queued moves to the end of its new priority.
- Stingy: adding an item that is already waiting to be processed does not queue it twice; it only
  raises its priority to the maximum given.
- Never two workers on one item: an item added while a worker processes it is not handed out until
  ``done``; then it is queued exactly once more, with the highest priority given meanwhile.
- Shutdown: after ``shut_down`` adds are ignored; items already queued (and items re-queued by
  ``done`` for an add made before shutdown) are still handed out; ``get`` raises :class:`ShutDown`
  once none is left. ``shut_down_with_drain`` also waits until every such item is done.
- No per-key state outlives an item: once every item handed out is done and nothing is queued, the
  queue holds no reference to any key (only one empty FIFO per distinct priority ever used).

Deliberate differences from client-go: ``done`` of an item that is not being processed raises
``ValueError`` (client-go ignores it, which can queue an item twice); ``shut_down_with_drain``
waits for queued items as well as for those being processed, so nothing added before the shutdown
is lost (client-go waits only for the processing set). Unlike controller-runtime's priority queue,
``get`` keeps handing out queued items after ``shut_down``, as client-go does.
"""

from __future__ import annotations

import asyncio
import math
from bisect import insort
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

from pyctrl import trace as _trace
from pyctrl.workqueue._clock import Clock, RealClock
from pyctrl.workqueue._metrics import QueueMetrics, _Series

__all__ = ["LOW_PRIORITY", "Queue", "ShutDown"]

T = TypeVar("T", bound=Hashable)

#: Priority for events that are not news (initial list, resyncs), as in controller-runtime.
LOW_PRIORITY = -100

# The top priority while nothing is queued: below every int, equal to none (typed as an int so
# that the top priority of a non-empty queue reads as one).
_NO_PRIORITY = cast(int, -math.inf)

# Stale bucket entries (left behind by priority raises) are compacted away past this many.
_MIN_COMPACT = 1024


class ShutDown(Exception):
    """Raised by :meth:`Queue.get` once the queue is shut down and no item is left to hand out."""


class Queue(Generic[T]):
    """A deduplicating, priority-ordered work queue for asyncio workers.

    Worker loop::

        while True:
            try:
                item = await queue.get()
            except ShutDown:
                return
            try:
                await handle(item)
            finally:
                queue.done(item)   # always, or the item is never handed out again

    All methods must be called from the event loop's thread. ``name`` turns on the ``workqueue_*``
    metrics (labels ``name`` and ``controller``); ``clock`` is used for metric timestamps.
    """

    def __init__(self, *, name: str | None = None, clock: Clock | None = None) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        # The dirty set, every item that needs processing, in two dicts: ready_at maps each to when
        # it became ready (metrics only: 0.0 without a name); priority maps those whose priority
        # is not 0 to it. The common case fills one dict and allocates nothing per item but the
        # time (an entry tuple per item cost an allocation and the cyclic GC's attention).
        # Invariant: an item is queued (can be handed out) iff it is dirty and not in processing,
        # and then exactly one of its entries in the buckets is live: the one in its priority's
        # bucket that no stale count covers (see `stale`).
        self._ready_at: dict[T, float] = {}
        self._priority: dict[T, int] = {}
        # processing: items handed out by get and not yet done -> when they were handed out
        # (metrics only: 0.0 without a name). get never hands out one of these, so no item is
        # processed by two workers at once.
        self._processing: dict[T, float] = {}
        # readded: how many items are both dirty and processing (added while processed). So
        # len(self) == len(ready_at) - readded, and done() looks in the dirty set only if one may be.
        self._readded = 0
        # The metrics keep their timestamps in ready_at and processing: no dict of their own.
        self._metrics: QueueMetrics[T] | None = (
            QueueMetrics(name, self._clock, self._ready_at, self._processing) if name else None
        )
        # What the hot paths update: _now is the metrics' clock (None: no metrics,
        # then nothing below is touched), _series the name's series (an unregistered one without).
        self._now: Callable[[], float] | None = None if self._metrics is None else self._metrics.now
        self._series = _Series() if self._metrics is None else self._metrics.series
        self._queue_duration = self._series.queue_duration
        self._work_duration = self._series.work_duration
        # buckets: priority -> FIFO of items, one per priority ever used. priorities: bucket keys,
        # ascending. top: the highest non-empty bucket, top_priority its priority; an empty deque
        # and _NO_PRIORITY if all are empty, which is exactly when nothing is queued (stale entries
        # exist only beside a live one: handing out the last live entry drops them).
        self._buckets: dict[int, deque[T]] = {}
        self._priorities: list[int] = []
        self._no_bucket: deque[T] = deque()
        self._top = self._no_bucket
        self._top_priority = _NO_PRIORITY
        # stale: (priority, item) -> how many entries of item in that priority's bucket are stale
        # (left behind when the item's priority was raised); stale_count: their total. An item
        # gets a new entry only once its older ones are stale, so the stale entries of an item in
        # a bucket come before its live one: get skips an entry while a stale count covers it.
        self._stale: dict[tuple[int, T], int] = {}
        self._stale_count = 0
        # getters: futures of get() calls waiting for an item; one is woken per queued item.
        self._getters: deque[asyncio.Future[None]] = deque()
        # drainers: futures of shut_down_with_drain() calls, woken when dirty and processing are empty.
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        # waiting: items a subclass holds back (DelayingQueue: delayed adds); always empty here.
        # add() calls _ready_now only when it is not empty, so a plain add pays one truth test.
        self._waiting: dict[T, Any] = {}

    def __len__(self) -> int:
        """Number of items ready to be handed out (not those being processed or waiting for a delay)."""
        return len(self._ready_at) - self._readded

    def add(self, item: T, *, priority: int = 0) -> None:
        """Mark ``item`` as needing processing, with at least ``priority`` (higher goes first).

        Ignored once the queue is shutting down. If ``item`` is already waiting to be processed,
        only its priority is raised; if it is being processed, it is queued again on ``done``.
        """
        if _trace.ENABLED:
            _trace.queue_add(self, item, priority)
        if self._shutting_down:
            return
        if self._waiting:
            priority = self._ready_now(item, priority)
        ready_at = self._ready_at
        if item in ready_at:  # dirty already: at most its priority rises
            if priority > self._priority.get(item, 0):
                self._raise_priority(item, priority)
            return
        now = self._now
        if now is None:
            ready_at[item] = 0.0
        else:
            ready_at[item] = now()
            self._series.adds += 1
        if priority:
            self._priority[item] = priority
        if self._processing and item in self._processing:
            self._readded += 1
            return  # done() queues it
        if priority == self._top_priority:
            self._top.append(item)  # the common case: the top bucket is this priority's
        else:
            self._enqueue(item, priority)
        if self._getters:
            self._wake_one_getter()

    async def get(self) -> T:
        """Wait for the next item and hand it out. You must call ``done(item)`` when finished.

        Raises :class:`ShutDown` once the queue is shut down and no item is queued.
        """
        if not self._top:  # nothing queued (see `top`)
            await self._wait_for_item()
        return self._hand_out()[0]

    async def get_with_priority(self) -> tuple[T, int]:
        """Like :meth:`get`, also returning the item's priority (to re-add it with the same one)."""
        if not self._top:  # nothing queued (see `top`)
            await self._wait_for_item()
        return self._hand_out()

    def _hand_out(self) -> tuple[T, int]:
        """Take the first live entry of the top bucket (the caller ensures one is queued)."""
        if self._stale:
            self._drop_stale()
        bucket, priority = self._top, self._top_priority
        item = bucket.popleft()
        if not bucket:
            self._find_top()
        ready_at = self._ready_at.pop(item)
        if priority:
            del self._priority[item]
        now = self._now
        if now is None:
            self._processing[item] = 0.0
        else:
            self._processing[item] = started = now()
            self._queue_duration.observe(started - ready_at)
        return item, priority

    def done(self, item: T) -> None:
        """Mark ``item``, handed out by ``get``, as finished. Call it exactly once per ``get``.

        If ``item`` was added while being processed, it is queued again now.
        Raises ``ValueError`` if ``item`` is not being processed.
        """
        try:
            started = self._processing.pop(item)
        except KeyError:
            raise ValueError(f"done({item!r}): the item is not being processed") from None
        now = self._now
        if now is not None:
            self._work_duration.observe(now() - started)
        if _trace.ENABLED:
            _trace.queue_done(self, item)
        if self._readded and item in self._ready_at:
            self._readded -= 1
            self._enqueue(item, self._priority.get(item, 0))
            if self._getters:
                self._wake_one_getter()
        elif self._drainers and not self._ready_at and not self._processing:
            drainers, self._drainers = self._drainers, []
            for drainer in drainers:
                if not drainer.done():
                    drainer.set_result(None)

    def shut_down(self) -> None:
        """Ignore further adds; let workers take what is queued, then make ``get`` raise ``ShutDown``."""
        self._shutting_down = True
        getters, self._getters = self._getters, deque()
        for getter in getters:
            if not getter.done():
                getter.set_result(None)

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every queued or processing item is done.

        Workers must keep calling ``get``/``done`` meanwhile, or this never returns.
        """
        self.shut_down()
        if not self._ready_at and not self._processing:
            return
        drainer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drainers.append(drainer)
        try:
            await drainer
        finally:
            if drainer in self._drainers:
                self._drainers.remove(drainer)

    def shutting_down(self) -> bool:
        """Whether ``shut_down`` (or ``shut_down_with_drain``) was called."""
        return self._shutting_down

    # -- internals -----------------------------------------------------------------------------

    @property
    def _dirty(self) -> Mapping[T, tuple[int, float]]:
        """The dirty set as item -> (priority, ready time): a read-only view (``pyctrl.trace`` reads it)."""
        return _DirtyView(self._ready_at, self._priority)

    def _ready_now(self, item: T, priority: int) -> int:
        """``add`` found items held back: release ``item`` if it is one; returns its priority."""
        return priority

    def _new_bucket(self, priority: int) -> deque[T]:
        bucket = self._buckets[priority] = deque()
        insort(self._priorities, priority)
        return bucket

    def _enqueue(self, item: T, priority: int) -> None:
        """Append ``item`` to the FIFO of ``priority``."""
        bucket = self._buckets.get(priority)
        if bucket is None:
            bucket = self._new_bucket(priority)
        bucket.append(item)
        if priority > self._top_priority:
            self._top = bucket
            self._top_priority = priority

    def _find_top(self) -> None:
        """The top bucket ran empty: point ``_top`` at the highest non-empty one."""
        for priority in reversed(self._priorities):
            bucket = self._buckets[priority]
            if bucket:
                self._top = bucket
                self._top_priority = priority
                return
        self._top = self._no_bucket
        self._top_priority = _NO_PRIORITY

    def _raise_priority(self, item: T, priority: int) -> None:
        """A dirty ``item`` was added with a higher ``priority`` than its own (its ready time stays)."""
        old = self._priority.get(item, 0)
        if priority:
            self._priority[item] = priority
        else:
            del self._priority[item]
        if item in self._processing:
            return  # done() queues it with the raised priority
        self._enqueue(item, priority)  # its entry at the old priority is now stale
        key = (old, item)
        self._stale[key] = self._stale.get(key, 0) + 1
        self._stale_count += 1
        if self._stale_count > max(len(self), _MIN_COMPACT):
            self._compact()

    def _drop_stale(self) -> None:
        """Drop the stale entries in front of the next live one; if that is the last live entry, drop
        every stale entry (so none outlives the queue's last item). Needs ``len(self) > 0``."""
        stale = self._stale
        while True:
            bucket = self._top
            item = bucket[0]
            key = (self._top_priority, item)
            count = stale.get(key)
            if count is None:
                break
            bucket.popleft()
            if count == 1:
                del stale[key]
            else:
                stale[key] = count - 1
            self._stale_count -= 1
            if not bucket:
                self._find_top()
        if len(self) == 1:  # everything else is stale
            for other in self._buckets.values():
                other.clear()
            bucket.append(item)
            stale.clear()
            self._stale_count = 0

    def _compact(self) -> None:
        """Drop stale entries from the buckets, keeping the order of the live ones."""
        stale = self._stale
        for priority, bucket in self._buckets.items():
            live = []
            for item in bucket:
                key = (priority, item)
                count = stale.get(key)
                if count is None:
                    live.append(item)
                elif count == 1:
                    del stale[key]
                else:
                    stale[key] = count - 1
            bucket.clear()
            bucket.extend(live)
        self._find_top()
        self._stale_count = 0

    async def _wait_for_item(self) -> None:
        """Return once an item is queued; raise ``ShutDown`` if shut down with nothing queued."""
        loop = asyncio.get_running_loop()
        while len(self._ready_at) == self._readded:
            if self._shutting_down:
                raise ShutDown
            getter: asyncio.Future[None] = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                if getter.cancelled():
                    if getter in self._getters:
                        self._getters.remove(getter)
                else:  # woken, then cancelled before taking the item: pass the wake-up on
                    self._wake_one_getter()
                raise

    def _wake_one_getter(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return


class _DirtyView(Mapping[T, tuple[int, float]]):
    """``Queue._dirty``: the dirty items with their priority and ready time, read-only."""

    __slots__ = ("_priority", "_ready_at")

    def __init__(self, ready_at: dict[T, float], priority: dict[T, int]) -> None:
        self._ready_at = ready_at
        self._priority = priority

    def __getitem__(self, item: T) -> tuple[int, float]:
        return self._priority.get(item, 0), self._ready_at[item]

    def __iter__(self) -> Iterator[T]:
        return iter(self._ready_at)

    def __len__(self) -> int:
        return len(self._ready_at)
