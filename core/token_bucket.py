"""A thread-safe token bucket, used for per-tenant admission and per-dependency rate limits."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``; starts full.

    ``take(n)`` either takes ``n`` tokens and returns 0.0, or takes nothing and returns the
    seconds until ``n`` tokens will be there (the retry-after). ``clock`` is a monotonic
    number of seconds, injectable so tests need not sleep.
    """

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"token bucket rate must be a positive finite number, got {rate!r}")
        if not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"token bucket burst must be >= 1, got {burst!r}")
        self.rate = float(rate)
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        # A clock that steps back (it should not, being monotonic) must not drain the bucket.
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
        self._updated = now

    def take(self, tokens: float = 1.0) -> float:
        """Take ``tokens`` if available (returns 0.0), else return the wait in seconds."""
        if tokens > self.burst:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of burst {self.burst}")
        with self._lock:
            self._refill()
            if self._tokens >= tokens:
                self._tokens -= tokens
                return 0.0
            return (tokens - self._tokens) / self.rate

    def give_back(self, tokens: float) -> None:
        """Return tokens taken for work that was not done after all (capped at ``burst``)."""
        with self._lock:
            self._refill()
            self._tokens = min(self.burst, self._tokens + tokens)

    @property
    def available(self) -> float:
        """Tokens available now."""
        with self._lock:
            self._refill()
            return self._tokens

    @property
    def full(self) -> bool:
        return self.available >= self.burst
