"""The delaying queue: ``add_after(item, seconds)`` on top of the base queue.

Mirrors client-go ``util/workqueue/delaying_queue.go`` (a heap of ready times feeding the base
queue), with controller-runtime ``priorityqueue``'s dedup of delayed adds: one pending entry per
item, keeping the earliest ready time and the highest priority.

Guarantees:

- An item added with ``add_after(item, seconds)`` is not handed out before ``seconds`` have passed
  on the queue's clock (unless it is added again with less or no delay); ``seconds <= 0`` adds now.
- Re-adding an item that is waiting keeps the earliest ready time and the highest priority; adding
  it without delay makes it ready now (with the higher of the two priorities); delaying an item
  that is already queued only raises its priority (it is ready now, the earliest time there is).
- Items becoming ready are queued in order of ready time (ties: order of the adds), each behind
  the items of its priority that were already queued.
- One clock timer at a time, for the earliest ready time; no task. ``shut_down`` cancels it and
  drops items still waiting for their delay (as client-go does); ``add_after`` after shutdown is
  ignored.
- No per-key state outlives an item: nothing waiting means no entry, no heap item and no timer.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable
from typing import TypeVar

from pyctrl import trace as _trace
from pyctrl.workqueue._clock import Clock, Timer
from pyctrl.workqueue._queue import Queue

__all__ = ["DelayingQueue"]

T = TypeVar("T", bound=Hashable)


class _Waiting:
    """The pending delayed add of one item."""

    __slots__ = ("order", "priority", "ready_at")

    def __init__(self, ready_at: float, priority: int, order: int) -> None:
        self.ready_at = ready_at
        self.priority = priority
        self.order = order  # identifies its live heap entry


class DelayingQueue(Queue[T]):
    """A :class:`Queue` that can also add an item after a delay (``add_after``)."""

    def __init__(self, *, name: str | None = None, clock: Clock | None = None) -> None:
        super().__init__(name=name, clock=clock)
        # waiting: items whose add is delayed -> their pending add.
        # Invariant: an item is never both waiting and dirty (ready adds take it out of waiting).
        self._waiting: dict[T, _Waiting] = {}
        # heap of (ready_at, order, item); an entry is live iff waiting[item].order == order.
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()
        # The one timer, due at the earliest live ready time (math.inf: no timer).
        self._timer: Timer | None = None
        self._timer_deadline = math.inf

    def add_after(self, item: T, seconds: float, *, priority: int = 0) -> None:
        """Add ``item`` once ``seconds`` have passed (now if ``seconds <= 0``). Ignored after shutdown."""
        if _trace.ENABLED:
            _trace.queue_add_after(self, item, seconds, priority)
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(item, priority=priority)
            return
        if self._metrics is not None:
            self._metrics.retry()
        if item in self._ready_at:
            self.add(item, priority=priority)  # already ready: only raise the priority
            return
        ready_at = self._clock.now() + seconds
        waiting = self._waiting.get(item)
        if waiting is None:
            waiting = self._waiting[item] = _Waiting(ready_at, priority, next(self._order))
        else:
            waiting.priority = max(waiting.priority, priority)
            if ready_at >= waiting.ready_at:
                return
            waiting.ready_at = ready_at
            waiting.order = next(self._order)
            self._dropped_heap_entry()
        heapq.heappush(self._heap, (ready_at, waiting.order, item))
        if ready_at < self._timer_deadline:
            self._arm()

    def shut_down(self) -> None:
        """Like :meth:`Queue.shut_down`; items still waiting for their delay are dropped."""
        self._waiting.clear()
        self._heap.clear()
        self._cancel_timer()
        super().shut_down()

    # -- internals -----------------------------------------------------------------------------

    def _ready_now(self, item: T, priority: int) -> int:
        """``add`` of an item waiting for its delay: it is ready now, with the higher priority."""
        waiting = self._waiting.pop(item, None)
        if waiting is None:
            return priority
        self._dropped_heap_entry()
        if _trace.ENABLED:
            _trace.delay_cut(self, item)
        return max(priority, waiting.priority)

    def _is_live(self, entry: tuple[float, int, T]) -> bool:
        waiting = self._waiting.get(entry[2])
        return waiting is not None and waiting.order == entry[1]

    def _dropped_heap_entry(self) -> None:
        """A heap entry just went stale: clean up so stale entries never outnumber live ones."""
        if not self._waiting:
            self._heap.clear()
            self._cancel_timer()
        elif len(self._heap) > 2 * len(self._waiting) + 64:
            self._heap = [entry for entry in self._heap if self._is_live(entry)]
            heapq.heapify(self._heap)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = math.inf

    def _arm(self) -> None:
        """Point the timer at the earliest live ready time (or at nothing)."""
        heap = self._heap
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)
        deadline = heap[0][0] if heap else math.inf
        if deadline == self._timer_deadline:
            return
        self._cancel_timer()
        if heap:
            self._timer_deadline = deadline
            self._timer = self._clock.call_at(deadline, self._fire)

    def _fire(self) -> None:
        """Timer callback: queue every item whose ready time has come, then re-arm."""
        self._timer = None
        self._timer_deadline = math.inf
        now = self._clock.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, order, item = heapq.heappop(heap)
            waiting = self._waiting.get(item)
            if waiting is None or waiting.order != order:
                continue  # stale
            del self._waiting[item]
            if _trace.ENABLED:
                _trace.delay_elapsed(self, item)
            self.add(item, priority=waiting.priority)
        if not self._waiting:
            heap.clear()
        self._arm()
