"""A Prometheus histogram's series kept as plain numbers, for hot paths on the event loop.

``prometheus_client``'s ``Histogram.observe`` takes a lock and costs thousands of instructions; the
controller and workqueue metrics observe once or twice per item, on the event loop, and a scrape
(possibly on another thread) only reads. A subclass names its bucket upper bounds in ``BOUNDS``;
``observe`` finds the bucket with ``bisect_left`` (a subclass may unroll it for its bounds), and
``buckets()`` gives the cumulative counts a ``HistogramMetricFamily`` takes.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import ClassVar

from prometheus_client.utils import floatToGoString

__all__ = ["Histogram"]


class Histogram:
    """Bucket counts (the last: above every bound, ``+Inf`` only) and the sum of one series."""

    __slots__ = ("counts", "total")
    BOUNDS: ClassVar[tuple[float, ...]] = ()
    _NAMES: ClassVar[list[str]] = ["+Inf"]

    def __init_subclass__(cls) -> None:
        cls._NAMES = [*map(floatToGoString, cls.BOUNDS), "+Inf"]

    def __init__(self) -> None:
        self.counts = [0] * (len(self.BOUNDS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.BOUNDS, seconds)] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, float]]:
        """(upper bound as Prometheus writes it, cumulative count) per bucket, ``+Inf`` last."""
        cumulative, out = 0, []
        for name, count in zip(self._NAMES, list(self.counts), strict=True):
            cumulative += count
            out.append((name, float(cumulative)))
        return out
