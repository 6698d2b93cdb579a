"""Work queues for controllers: client-go ``util/workqueue`` for asyncio, with priorities.

Layers, each adding to the one below (as client-go's interfaces embed each other):

- :class:`Queue` -- add / get / done / len / shut_down / shut_down_with_drain / shutting_down;
  dedup, never two workers on one item, priorities (controller-runtime ``priorityqueue``).
- :class:`DelayingQueue` -- + ``add_after``.
- :class:`RateLimitingQueue` -- + ``add_rate_limited`` / ``forget`` / ``num_requeues``, driven by a
  :class:`RateLimiter` (:class:`ItemExponentialFailureRateLimiter`, :class:`BucketRateLimiter`,
  :class:`MaxOfRateLimiter`, :func:`default_controller_rate_limiter`).

Time comes from an injected :class:`Clock` (:class:`RealClock` by default; :class:`FakeClock` for
tests). A queue given a ``name`` exports the ``workqueue_*`` metrics on ``pyctrl.metrics.registry``.
Each module's docstring lists its guarantees.
"""

from pyctrl.workqueue._clock import Clock, FakeClock, RealClock, Timer
from pyctrl.workqueue._delaying import DelayingQueue
from pyctrl.workqueue._queue import LOW_PRIORITY, Queue, ShutDown
from pyctrl.workqueue._rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from pyctrl.workqueue._rate_limiting import RateLimitingQueue

__all__ = [
    "LOW_PRIORITY",
    "BucketRateLimiter",
    "Clock",
    "DelayingQueue",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "RealClock",
    "ShutDown",
    "Timer",
    "default_controller_rate_limiter",
]
