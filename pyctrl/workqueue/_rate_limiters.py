"""Rate limiters: how long ``add_rate_limited`` delays an item.

Mirrors client-go ``util/workqueue/default_rate_limiters.go``: small strategy classes behind one
:class:`RateLimiter` protocol, combined with :class:`MaxOfRateLimiter`; controller-runtime's
``workqueue.DefaultTypedControllerRateLimiter`` is :func:`default_controller_rate_limiter`.

Guarantees:

- :class:`ItemExponentialFailureRateLimiter`: the n-th ``when(item)`` since the last
  ``forget(item)`` returns ``base_delay * 2**(n-1)``, capped at ``max_delay`` (5 ms, 10 ms, 20 ms …
  1000 s by default); ``num_requeues`` is n; ``forget`` drops every trace of the item.
- :class:`BucketRateLimiter`: one token bucket for all items (``golang.org/x/time/rate`` semantics):
  ``burst`` calls return 0, then each call reserves the next token, ``1/qps`` seconds apart; tokens
  refill at ``qps`` per second on the injected clock. Keeps no per-item state.
- :class:`MaxOfRateLimiter`: ``when`` is the maximum over its limiters (each is asked, so each
  counts the failure), ``num_requeues`` the maximum, ``forget`` forgets in all.
- Delays are float seconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from pyctrl.workqueue._clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides how long to wait before an item is retried."""

    def when(self, item: T_contra) -> float:
        """Seconds to wait before retrying ``item``; counts one more failure of it."""

    def forget(self, item: T_contra) -> None:
        """``item`` succeeded: stop tracking it. Call it, or per-item state grows without bound."""

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are being counted."""


class ItemExponentialFailureRateLimiter(Generic[T]):
    """Per-item exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must be non-negative")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        try:
            backoff = math.ldexp(self._base_delay, exponent)
        except OverflowError:
            return self._max_delay
        return min(backoff, self._max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket: ``burst`` immediate retries, then ``qps`` per second."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if not (0 < qps < math.inf) or burst < 1:
            raise ValueError(f"need 0 < qps < inf and burst >= 1, got qps={qps} burst={burst}")
        self._qps = qps
        self._burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = float(burst)  # may go negative: tokens reserved ahead of time
        self._last: float | None = None  # clock time _tokens was computed at

    def when(self, item: object) -> float:
        now = self._clock.now()
        if self._last is not None and now > self._last:
            self._tokens = min(float(self._burst), self._tokens + (now - self._last) * self._qps)
        if self._last is None or now > self._last:
            self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, item: object) -> None:
        pass

    def num_requeues(self, item: object) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The strictest of several limiters."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter[Hashable]:
    """controller-runtime's default: per-item 5 ms … 1000 s backoff, and overall 10 qps, burst 100."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
