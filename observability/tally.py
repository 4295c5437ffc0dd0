"""``MetricTally``: counter increments and histogram observations gathered, then written once.

Under a supervisor every metric value is a memory-mapped file entry shared with the scrape
(prometheus-client's multiprocess mode): each ``inc`` takes a lock, checks the pid and packs
the value into the file, about 3 us, and a histogram observation is two of them. A worker
records five such values per job; gathered over a poll round and written per series, they
cost one write per series and bucket instead of one per job.

Not thread-safe: one thread adds and flushes (the worker's poll thread).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any


class MetricTally:
    """Pending ``inc`` per counter child and observations per histogram child."""

    __slots__ = ("_counts", "_observations")

    def __init__(self) -> None:
        self._counts: dict[Any, int] = {}
        self._observations: dict[Any, list[float]] = {}

    def count(self, counter: Any) -> None:
        """``counter.inc()``, later."""
        counts = self._counts
        counts[counter] = counts.get(counter, 0) + 1

    def observe(self, histogram: Any, value: float) -> None:
        """``histogram.observe(value)``, later (``value`` already checked: not NaN)."""
        values = self._observations.get(histogram)
        if values is None:
            self._observations[histogram] = [value]
        else:
            values.append(value)

    def count_many(self, counter: Any, amount: int) -> None:
        """``counter.inc(amount)``, later."""
        counts = self._counts
        counts[counter] = counts.get(counter, 0) + amount

    def observe_many(self, histogram: Any, values: list[float]) -> None:
        """``observe`` of each of ``values`` (already checked: none is NaN)."""
        if not values:
            return
        known = self._observations.get(histogram)
        if known is None:
            self._observations[histogram] = values
        else:
            known.extend(values)

    def flush(self) -> None:
        """Write everything gathered since the last flush."""
        if self._counts:
            counts, self._counts = self._counts, {}
            for counter, amount in counts.items():
                counter.inc(amount)
        if self._observations:
            observations, self._observations = self._observations, {}
            for histogram, values in observations.items():
                observe_all(histogram, values)


def observe_all(histogram: Any, values: list[float]) -> None:
    """``histogram.observe(v)`` for every ``v`` of ``values``, with one write for the sum and
    one per bucket hit. A labelled ``Histogram`` child keeps its bounds (``+Inf`` last) in
    ``_upper_bounds``, one value per bucket in ``_buckets`` and the sum in ``_sum``; ``observe``
    adds 1 to the first bucket whose bound is >= the value (a unit test pins this against
    ``observe`` itself)."""
    bounds = histogram._upper_bounds
    hits = [0] * len(bounds)
    for value in values:
        hits[bisect_left(bounds, value)] += 1
    histogram._sum.inc(sum(values))
    buckets = histogram._buckets
    for index, hit in enumerate(hits):
        if hit:
            buckets[index].inc(hit)
