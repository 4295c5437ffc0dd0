"""The retry policy: how long a failed job waits before its next attempt.

Formula (exponential backoff with "equal jitter")::

    ceiling = min(max_delay, base_delay * multiplier ** (attempt - 1))
    delay   = ceiling * (1 - jitter) + uniform(0, ceiling * jitter)

``attempt`` is the attempt that just failed (1 for the first). With the defaults (base 2 s,
multiplier 3, cap 30 min, jitter 0.5) attempts 1, 2, 3, 4 wait about 1-2 s, 3-6 s, 9-18 s,
27-54 s. Jitter spreads a burst of failures (one downstream outage) so that retries do not
arrive as a second burst.

Precedence, first that applies wins:

1. the handler's own word: ``RetryableError(delay=...)``, ``RateLimited(retry_after)``
   (the downstream's Retry-After) or ``Snooze(delay)``;
2. the job's ``max_attempts`` (set at enqueue), then the job type's, then the worker default;
3. the job type's ``retry_policy``, then the queue's, then ``RetryPolicy()``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; see the module docstring for the formula."""

    base_delay: float = 2.0
    multiplier: float = 3.0
    max_delay: float = 1_800.0
    jitter: float = 0.5
    random_source: random.Random = field(default_factory=random.Random, compare=False)

    def __post_init__(self) -> None:
        for name in ("base_delay", "multiplier", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"RetryPolicy.{name} must be a positive finite number")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("RetryPolicy.jitter must be within [0, 1]")

    def ceiling(self, attempt: int) -> float:
        exponent = max(0, attempt - 1)
        # Cap before exponentiation overflows: 3 ** 700 is not a float.
        if exponent > 64:
            return self.max_delay
        return min(self.max_delay, self.base_delay * self.multiplier**exponent)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt``."""
        ceiling = self.ceiling(attempt)
        return ceiling * (1.0 - self.jitter) + self.random_source.uniform(0, ceiling * self.jitter)
