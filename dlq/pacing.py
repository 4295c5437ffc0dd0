"""Pacing of DLQ replays (``--rate``): a replay must not flood the queue it repairs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from tenantq.errors import ConfigurationError
from tenantq.token_bucket import TokenBucket

#: The highest ``--rate`` taken: above it, pacing would not slow a replay down anyway.
MAX_RATE = 1_000_000.0


def check_rate(rate: float) -> float:
    """``rate`` if it is a number of publishes per second a replay can keep to, else a
    ``ConfigurationError`` saying what is expected (0, negative, NaN and infinity are not)."""
    if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
        raise ConfigurationError(
            f"rate must be a number of publishes per second above 0 and at most {MAX_RATE:,.0f}"
            f", got {rate!r}"
        )
    return rate


class RateLimiter:
    """At most ``rate`` publishes per second on average, in bursts of at most ``burst``
    (default: one second's worth). ``acquire`` blocks until its tokens are there.

    ``clock`` and ``sleep`` are injectable so tests need not wait.
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive finite number, got {rate!r}")
        self.rate = rate
        self.burst = int(burst if burst is not None else max(1.0, rate))
        self._bucket = TokenBucket(rate, self.burst, clock)
        self._sleep = sleep

    def acquire(self, count: int = 1) -> float:
        """Take ``count`` tokens (at most ``burst`` at a time), waiting as needed; returns the
        seconds waited."""
        waited = 0.0
        left = count
        while left > 0:
            step = min(left, self.burst)
            wait = self._bucket.take(step)
            if wait > 0:
                self._sleep(wait)
                waited += wait
                continue
            left -= step
        return waited

    def batch_size(self, ceiling: int) -> int:
        """How many records to handle per step so that one step is about a second's worth:
        rows revived ahead of their publish stay few if the replay is interrupted."""
        return max(1, min(ceiling, int(self.rate)))
