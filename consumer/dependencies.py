"""Per-dependency guards: a token bucket (rate, burst) and a circuit breaker for each
downstream a handler declares (``@app.job(..., dependencies=["smtp"])``).

A job runs only when every dependency it names has a token and a closed (or probing) breaker.
No token: the job waits in the dispatcher (others run). Open breaker: the job is moved to a
retry tier without running and without consuming an attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tenantq.consumer.circuit_breaker import BreakerPolicy, CircuitBreaker
from tenantq.token_bucket import TokenBucket


@dataclass(frozen=True)
class DependencyPolicy:
    """Limits of one dependency. ``rate`` None means no rate limit."""

    rate: float | None = None
    burst: int = 10
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)


def policies_from(declared: dict[str, dict[str, object]]) -> dict[str, DependencyPolicy]:
    """``App.dependencies`` (plain options) as policies."""
    policies = {}
    for name, options in declared.items():
        breaker = BreakerPolicy(
            failure_rate=float(options["failure_rate"]),  # type: ignore[arg-type]
            minimum_calls=int(options["minimum_calls"]),  # type: ignore[call-overload]
            window=int(options["window"]),  # type: ignore[call-overload]
            open_seconds=float(options["open_seconds"]),  # type: ignore[arg-type]
            probes=int(options["probes"]),  # type: ignore[call-overload]
        )
        rate = options["rate"]
        policies[name] = DependencyPolicy(
            rate=None if rate is None else float(rate),  # type: ignore[arg-type]
            burst=int(options["burst"]),  # type: ignore[call-overload]
            breaker=breaker,
        )
    return policies


class DependencyGuard:
    def __init__(
        self,
        policies: dict[str, DependencyPolicy],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._policies = policies
        self._buckets: dict[str, TokenBucket] = {}
        self._breakers: dict[str, CircuitBreaker] = {}

    def _bucket(self, name: str) -> TokenBucket | None:
        policy = self._policies.get(name)
        if policy is None or policy.rate is None:
            return None
        if name not in self._buckets:
            self._buckets[name] = TokenBucket(policy.rate, policy.burst, self._clock)
        return self._buckets[name]

    def breaker(self, name: str) -> CircuitBreaker:
        if name not in self._breakers:
            policy = self._policies.get(name, DependencyPolicy())
            self._breakers[name] = CircuitBreaker(policy.breaker, self._clock)
        return self._breakers[name]

    def open_for(self, names: Iterable[str]) -> float | None:
        """Seconds until the longest-open breaker among ``names`` half-opens; None when none
        is open."""
        waits = [wait for name in names if (wait := self.breaker(name).blocked_for())]
        return max(waits) if waits else None

    def ready(self, names: Iterable[str]) -> bool:
        """True when every bucket has a token and no half-open breaker is out of probes
        (an open breaker counts as ready: the job is then deferred, not kept waiting)."""
        for name in names:
            bucket = self._bucket(name)
            if bucket is not None and bucket.available < 1:
                return False
            blocked = self.breaker(name).blocked_for()
            if blocked == 0.0 and self.breaker(name).state != "open":
                return False
        return True

    def acquire(self, names: Iterable[str]) -> bool:
        """Take a token and a call permission from each dependency, all or nothing."""
        taken: list[TokenBucket] = []
        acquired: list[CircuitBreaker] = []
        for name in names:
            bucket = self._bucket(name)
            if bucket is not None:
                if bucket.take() > 0:
                    break
                taken.append(bucket)
            breaker = self.breaker(name)
            if not breaker.acquire():
                break
            acquired.append(breaker)
        else:
            return True
        for bucket in taken:
            bucket.give_back(1)
        for breaker in acquired:
            breaker.return_permit()
        return False

    def record(self, names: Iterable[str], success: bool) -> dict[str, str]:
        """Record the outcome of a call that used ``names``; returns each breaker's state."""
        return {name: self.breaker(name).record(success) for name in names}
