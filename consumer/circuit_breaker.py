"""A circuit breaker per downstream dependency.

closed -> open: over the last ``window`` calls (at least ``minimum_calls``), the failure rate
reached ``failure_rate``. open -> half_open: after ``open_seconds``. half_open lets
``probes`` calls through at a time; a success closes the breaker, a failure opens it again for
another ``open_seconds``. While open, jobs that need the dependency are moved to a retry tier
without running and without consuming an attempt.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    failure_rate: float = 0.5
    minimum_calls: int = 10
    window: int = 50
    open_seconds: float = 30.0
    probes: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.failure_rate <= 1:
            raise ValueError("failure_rate must be within (0, 1]")
        if self.minimum_calls < 1 or self.window < self.minimum_calls:
            raise ValueError("need 1 <= minimum_calls <= window")
        if not self.open_seconds > 0 or self.probes < 1:
            raise ValueError("open_seconds must be > 0 and probes >= 1")


class CircuitBreaker:
    def __init__(self, policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._outcomes: deque[bool] = deque(maxlen=policy.window)
        self._state = CLOSED
        self._opened_at = 0.0
        self._probes_out = 0

    @property
    def state(self) -> str:
        with self._lock:
            self._advance()
            return self._state

    def _advance(self) -> None:
        if self._state == OPEN and self._clock() - self._opened_at >= self.policy.open_seconds:
            self._state = HALF_OPEN
            self._probes_out = 0

    def blocked_for(self) -> float | None:
        """Seconds until calls may try again while open; None when a call may go now
        (closed, or half-open with a probe slot free). Does not take the probe slot."""
        with self._lock:
            self._advance()
            if self._state == OPEN:
                return max(0.0, self.policy.open_seconds - (self._clock() - self._opened_at))
            if self._state == HALF_OPEN and self._probes_out >= self.policy.probes:
                return 0.0
            return None

    def acquire(self) -> bool:
        """Take permission for one call (a probe slot when half-open)."""
        with self._lock:
            self._advance()
            if self._state == OPEN:
                return False
            if self._state == HALF_OPEN:
                if self._probes_out >= self.policy.probes:
                    return False
                self._probes_out += 1
            return True

    def return_permit(self) -> None:
        """Give back a call permission that was taken but not used."""
        with self._lock:
            if self._state == HALF_OPEN:
                self._probes_out = max(0, self._probes_out - 1)

    def record(self, success: bool) -> str:
        """Record a call's outcome; returns the state afterwards."""
        with self._lock:
            self._advance()
            if self._state == HALF_OPEN:
                self._probes_out = max(0, self._probes_out - 1)
                if success:
                    self._state = CLOSED
                    self._outcomes.clear()
                else:
                    self._open()
                return self._state
            self._outcomes.append(success)
            calls = len(self._outcomes)
            failures = calls - sum(self._outcomes)
            if (
                self._state == CLOSED
                and calls >= self.policy.minimum_calls
                and failures / calls >= self.policy.failure_rate
            ):
                self._open()
            return self._state

    def _open(self) -> None:
        self._state = OPEN
        self._opened_at = self._clock()
        self._outcomes.clear()
