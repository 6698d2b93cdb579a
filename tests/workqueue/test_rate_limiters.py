"""The rate limiters' arithmetic (pyctrl/workqueue/_rate_limiters.py docstring)."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from pyctrl.workqueue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_limiter_doubles_from_the_base_delay_per_failure() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(5)]
    assert delays == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    assert limiter.num_requeues("a") == 5


def test_exponential_limiter_caps_at_the_max_delay() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(2000)]  # 2**2000 overflows a float
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0


def test_exponential_limiter_honours_custom_delays() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=1, max_delay=5)
    assert [limiter.when("a") for _ in range(5)] == [1, 2, 4, 5, 5]


def test_exponential_limiter_counts_items_separately() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    assert (limiter.num_requeues("a"), limiter.num_requeues("b"), limiter.num_requeues("c")) == (2, 1, 0)


def test_exponential_limiter_forget_starts_over_and_leaves_no_state() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    limiter.when("a")
    limiter.when("a")
    limiter.forget("a")
    limiter.forget("never-seen")
    assert limiter._failures == {}
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_bucket_limiter_allows_the_burst_then_spaces_retries_by_one_over_qps() -> None:
    limiter = BucketRateLimiter(qps=10, burst=100, clock=FakeClock())
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [limiter.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])


def test_bucket_limiter_refills_at_qps_on_its_clock() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=2, clock=clock)
    assert [limiter.when("x") for _ in range(4)] == pytest.approx([0, 0, 0.1, 0.2])
    clock.step(0.25)  # 2.5 tokens earned, 2 of them were already reserved
    assert limiter.when("x") == pytest.approx(0.05)
    clock.step(0.05)
    assert limiter.when("x") == pytest.approx(0.1)


def test_bucket_limiter_refill_is_capped_at_the_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=3, clock=clock)
    limiter.when("x")
    clock.step(3600)
    assert [limiter.when("x") for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


def test_bucket_limiter_keeps_no_per_item_state() -> None:
    limiter = BucketRateLimiter(clock=FakeClock())
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (float("inf"), 1), (1, 0)])
def test_bucket_limiter_rejects_impossible_parameters(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps"):
        BucketRateLimiter(qps=qps, burst=burst)


class FixedLimiter:
    def __init__(self, delay: float, requeues: int) -> None:
        self.delay = delay
        self.requeues = requeues
        self.asked: list[str] = []
        self.forgotten: list[str] = []

    def when(self, item: str) -> float:
        self.asked.append(item)
        return self.delay

    def forget(self, item: str) -> None:
        self.forgotten.append(item)

    def num_requeues(self, item: str) -> int:
        return self.requeues


def test_max_of_limiter_returns_the_largest_delay_and_asks_every_limiter() -> None:
    small, large = FixedLimiter(0.5, 1), FixedLimiter(3.0, 0)
    limiter = MaxOfRateLimiter[str](small, large)
    assert limiter.when("a") == 3.0
    assert small.asked == large.asked == ["a"]


def test_max_of_limiter_forgets_in_all_and_reports_the_largest_requeue_count() -> None:
    first, second = FixedLimiter(0, 4), FixedLimiter(0, 2)
    limiter = MaxOfRateLimiter[str](first, second)
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert first.forgotten == second.forgotten == ["a"]


def test_max_of_limiter_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter[str]()


def test_default_controller_rate_limiter_is_exponential_5ms_to_1000s_and_a_10_qps_bucket_of_100() -> None:
    limiter: RateLimiter[Hashable] = default_controller_rate_limiter(clock=FakeClock())
    # One item: the per-item backoff dominates while the bucket has tokens.
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    assert limiter.num_requeues("a") == 3
    # 97 more failures of other items empty the bucket; then the bucket's 0.1 s spacing dominates.
    assert all(limiter.when(i) == pytest.approx(0.005) for i in range(97))
    assert limiter.when("b") == pytest.approx(0.1)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    for _ in range(30):
        delay = limiter.when("c")
    assert delay == 1000.0
