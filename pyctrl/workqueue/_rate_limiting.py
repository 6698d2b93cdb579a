"""The rate-limiting queue: retries with backoff on top of the delaying queue.

Mirrors client-go ``util/workqueue/rate_limiting_queue.go``: three one-line methods delegating to a
:class:`~pyctrl.workqueue.RateLimiter`; this is the queue a controller uses.

Guarantees:

- ``add_rate_limited(item)`` is ``add_after(item, rate_limiter.when(item))``; after shutdown it is
  ignored without asking the limiter (so no limiter state is created for it).
- ``forget`` and ``num_requeues`` delegate to the limiter; after ``forget(item)`` and ``done(item)``
  neither the queue nor the default limiter holds anything about ``item``.
- ``rate_limiter=None`` means :func:`~pyctrl.workqueue.default_controller_rate_limiter`, built on the
  queue's clock.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from pyctrl.workqueue._clock import Clock
from pyctrl.workqueue._delaying import DelayingQueue
from pyctrl.workqueue._rate_limiters import RateLimiter, default_controller_rate_limiter

__all__ = ["RateLimitingQueue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` with per-item retry backoff. The queue of a controller.

    After handling an item: on failure call ``add_rate_limited(item)``; on success call
    ``forget(item)`` (or the item's failure count, and memory, stay); in both cases ``done(item)``.
    """

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock)
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock=self._clock)
        )

    def add_rate_limited(self, item: T, *, priority: int = 0) -> None:
        """Add ``item`` after the delay its rate limiter says (a retry). Remember to call ``forget``
        once it succeeds."""
        if self._shutting_down:
            return
        self.add_after(item, self._rate_limiter.when(item), priority=priority)

    def forget(self, item: T) -> None:
        """Stop counting failures of ``item`` (it succeeded). Does not remove it from the queue."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many failures of ``item`` the rate limiter counts."""
        return self._rate_limiter.num_requeues(item)
