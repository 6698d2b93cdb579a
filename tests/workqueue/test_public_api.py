"""The public names of pyctrl.workqueue (re-exported from its private modules)."""

from __future__ import annotations

from pyctrl import workqueue


def test_all_lists_exactly_the_public_names() -> None:
    assert sorted(workqueue.__all__) == [
        "BucketRateLimiter",
        "Clock",
        "DelayingQueue",
        "FakeClock",
        "ItemExponentialFailureRateLimiter",
        "LOW_PRIORITY",
        "MaxOfRateLimiter",
        "Queue",
        "RateLimiter",
        "RateLimitingQueue",
        "RealClock",
        "ShutDown",
        "Timer",
        "default_controller_rate_limiter",
    ]
    for name in set(workqueue.__all__) - {"LOW_PRIORITY"}:
        assert getattr(workqueue, name).__module__.startswith("pyctrl.workqueue._")
    public = {name for name in vars(workqueue) if not name.startswith("_")}
    assert public == set(workqueue.__all__)


def test_the_layers_stack_as_in_client_go() -> None:
    assert issubclass(workqueue.DelayingQueue, workqueue.Queue)
    assert issubclass(workqueue.RateLimitingQueue, workqueue.DelayingQueue)


def test_low_priority_is_controller_runtimes_minus_100() -> None:
    assert workqueue.LOW_PRIORITY == -100
