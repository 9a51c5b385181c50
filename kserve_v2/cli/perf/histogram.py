"""Latency histograms with fixed logarithmic buckets, so that histograms of different windows
and worker processes merge exactly (by adding counts), and percentiles of the merged histogram
are those of all the samples, to the bucket's resolution.

Bucket ``i`` holds latencies in ``[2**(i/32), 2**((i+1)/32))`` nanoseconds: 32 buckets per
doubling, so a percentile is off by at most 2.2 % (reported at the bucket's geometric middle,
within the exact minimum and maximum). The sum, minimum and maximum are exact.

Example::

    >>> h = LatencyHistogram()
    >>> for ns in (1_000_000, 2_000_000, 3_000_000):
    ...     h.record(ns)
    >>> round(h.percentile(50) / 1e6, 2), h.mean() / 1e6
    (2.0, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["BUCKETS_PER_DOUBLING", "LatencyHistogram"]

#: Buckets per doubling of the latency.
BUCKETS_PER_DOUBLING: Final = 32
_LOG2: Final = math.log2


class LatencyHistogram:
    """Counts of latencies (ns) in fixed log buckets, plus exact count, sum, min and max."""

    __slots__ = ("buckets", "count", "max", "min", "total")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    @staticmethod
    def bucket_of(ns: int) -> int:
        return int(_LOG2(ns) * BUCKETS_PER_DOUBLING) if ns > 1 else 0

    @staticmethod
    def bucket_bounds(index: int) -> tuple[float, float]:
        """The bucket's [low, high) bounds in ns."""
        return 2 ** (index / BUCKETS_PER_DOUBLING), 2 ** ((index + 1) / BUCKETS_PER_DOUBLING)

    def record(self, ns: int) -> None:
        index = int(_LOG2(ns) * BUCKETS_PER_DOUBLING) if ns > 1 else 0
        buckets = self.buckets
        buckets[index] = buckets.get(index, 0) + 1
        if self.count == 0 or ns < self.min:
            self.min = ns
        if ns > self.max:
            self.max = ns
        self.count += 1
        self.total += ns

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """Add ``other``'s samples to this histogram (exact); returns self."""
        if other.count == 0:
            return self
        for index, n in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + n
        self.min = other.min if self.count == 0 else min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total
        return self

    @classmethod
    def merged(cls, histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        result = cls()
        for h in histograms:
            result.merge(h)
        return result

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile in ns (0 without samples): the geometric middle of the
        bucket holding the sample of that rank, clamped to the exact min and max."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(self.count * p / 100))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                low, high = self.bucket_bounds(index)
                return float(min(max(math.sqrt(low * high), self.min), self.max))
        return float(self.max)

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "sum_ns": self.total,
            "min_ns": self.min,
            "max_ns": self.max,
            "buckets_per_doubling": BUCKETS_PER_DOUBLING,
            "buckets": {str(k): v for k, v in sorted(self.buckets.items())},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyHistogram:
        h = cls()
        h.count, h.total = int(data["count"]), int(data["sum_ns"])
        h.min, h.max = int(data["min_ns"]), int(data["max_ns"])
        h.buckets = {int(k): int(v) for k, v in data["buckets"].items()}
        return h

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.buckets, self.count, self.total, self.min, self.max)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.buckets, self.count, self.total, self.min, self.max = state

    def __repr__(self) -> str:
        return (
            f"LatencyHistogram(count={self.count}, mean_ms={self.mean() / 1e6:.3f}, "
            f"p99_ms={self.percentile(99) / 1e6:.3f})"
        )
