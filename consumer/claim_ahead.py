"""How many jobs a worker leases beyond its free handler slots.

Without it the worker runs in lockstep: slots free up, their jobs are claimed (one round trip
to Postgres), started, finish, and only then is the next batch claimed, so every slot sits
idle for a claim's round trip each time it turns over. With short jobs that idle time is most
of a slot's life (no-op jobs at 128 slots: a 4 ms claim beside a 4 ms run).

Claiming ahead leases the next batch while the current one runs; a claimed-ahead job waits in
the worker for a slot (its lease renewed by the heartbeat like a running job's). The number is
what the slots are expected to free up during about two claim round trips (finishes per
second, times the claim's latency, doubled), capped at ``worker.claim_ahead_limit``: short
jobs get a batch ahead, long jobs (a few finishes a second) none, so a job is rarely leased
long before it runs and no lease sits idle behind a slow handler.
"""

from __future__ import annotations

import math

#: Finishes are counted over windows this long before they move the rate.
RATE_WINDOW_SECONDS = 0.25
#: Weight of the newest window (finish rate) and the newest claim (latency).
RATE_WEIGHT = 0.5
LATENCY_WEIGHT = 0.2
#: Claim round trips worth of finishing slots to claim ahead.
ROUND_TRIPS = 2.0
#: The most claimed ahead when ``worker.claim_ahead_limit`` is unset and the slots are fewer.
#: Short jobs at the default 32 slots: claims and results in batches of hundreds, not of a few
#: dozen (half the Postgres and member CPU per job); long jobs claim none ahead whatever it is.
DEFAULT_LIMIT = 1_000


def default_claim_ahead_limit(slots: int) -> int:
    """The limit of a worker of ``slots`` that sets none."""
    return max(slots, DEFAULT_LIMIT)


class ClaimAhead:
    """The worker's estimate of how many jobs to claim ahead (poll thread only)."""

    def __init__(self, limit: int, now: float) -> None:
        self.limit = limit
        self._rate = 0.0  # finishes per second
        self._last_window_rate = 0.0  # the same over the last window alone
        self._latency = 0.0  # seconds from a claim's submission to its answer
        self._window_start = now
        self._window_count = 0

    @property
    def jobs(self) -> int:
        """Jobs to lease beyond the free slots now."""
        if self.limit <= 0:
            return 0
        # Rounded down: a slot that frees up less than once per two claims waits for none.
        return min(self.limit, math.floor(self._rate * self._latency * ROUND_TRIPS))

    def finishing_within(self, seconds: float) -> int:
        """Attempts the slots are expected to end within ``seconds``: at the smoothed rate or
        the last window's, whichever is lower, so that when short jobs give way to long ones
        the estimate falls within a window, not over the seconds the smoothing takes (rounded
        down: none for slots that free up less often)."""
        return math.floor(min(self._rate, self._last_window_rate) * seconds)

    def finished(self, count: int, now: float) -> None:
        """``count`` attempts ended (their slots are free)."""
        self._window_count += count
        elapsed = now - self._window_start
        if elapsed < RATE_WINDOW_SECONDS:
            return
        rate = self._last_window_rate = self._window_count / elapsed
        self._rate += RATE_WEIGHT * (rate - self._rate)
        self._window_start = now
        self._window_count = 0

    def claim_answered(self, seconds: float) -> None:
        """A claim took ``seconds`` from its submission to its answer."""
        if self._latency == 0.0:
            self._latency = seconds
        else:
            self._latency += LATENCY_WEIGHT * (seconds - self._latency)
