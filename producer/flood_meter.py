"""Which tenants flood a producer: the tenants whose jobs the producer hands to a Kafka client
of their own, so that its other tenants' jobs are not queued behind them.

One librdkafka client has one connection to each broker, at most five produce requests in
flight on it (with idempotence), and a broker answers the requests of one connection one after
the other. A tenant sending thousands of jobs a second through the client that also carries
the other tenants' jobs fills that pipe, and their few jobs wait for its requests to be
acknowledged before theirs are sent and answered. A flooding tenant gets the producer's second
client (``tenantq.producer.clients``); the meter only decides who floods.

Decision table, at the end of each window of ``WINDOW_SECONDS`` (counted by ``count``, from the
jobs handed to ``count`` since the window began):

| the tenant in the window | sends | and it |
| --- | --- | --- |
| at least ``rate`` jobs/s and ``FLOOD_SHARE`` of the producer's jobs | floods | joins now |
| at least half of ``rate`` jobs/s | floods (if it did) | stays |
| less, for ``CALM_SECONDS`` in a row | does not flood | leaves |

The share keeps an even bulk enqueue of many tenants (a backfill of 200 tenants, each at a
thousand jobs a second) on one client: no one of them is the flood, and a second client would
split the same requests in two. The half rate and the calm time keep a tenant near the line
from moving at every window (each move waits for the jobs in flight on the client it leaves).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: How long the meter counts before it decides: a flood is seen within about this long.
WINDOW_SECONDS = 0.1
#: The share of the producer's jobs in a window that a flooding tenant sends at least.
FLOOD_SHARE = 0.25
#: How long a flooding tenant stays below half the rate before it goes back.
CALM_SECONDS = 5.0


@dataclass(frozen=True)
class FloodChange:
    """A window's decision: the tenants that begin and the tenants that stop flooding."""

    joining: frozenset[str]
    leaving: frozenset[str]


class FloodMeter:
    """Counts the jobs a producer hands over, per tenant, and says who floods it.

    ``count`` is called by every publishing thread with the jobs per tenant of its
    publication; the window's counts are a ``collections.Counter``. The window's end is
    decided by one thread at a time; the others keep counting into the next window.
    ``flooding`` changes only through ``apply`` (the producer applies a change once the jobs
    of the tenants that move are acknowledged by the client they leave).
    """

    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        if rate <= 0:
            raise ValueError("a flood rate is a positive number of jobs per second")
        self.rate = rate
        self._clock = clock
        #: The tenants sent through the flood client now (replaced whole, read without a lock).
        self.flooding: frozenset[str] = frozenset()
        self._counts: collections.Counter[str] = collections.Counter()
        self._window_start = clock()
        #: Per flooding tenant, when it last sent at least half the rate.
        self._busy_at: dict[str, float] = {}
        self._deciding = threading.Lock()

    def count(self, jobs_per_tenant: Mapping[str, int]) -> FloodChange | None:
        """Count the jobs handed over (how many of each tenant); at the end of a window, the
        change it decides (None: no change)."""
        self._counts.update(jobs_per_tenant)
        now = self._clock()
        if now - self._window_start < WINDOW_SECONDS:
            return None
        if not self._deciding.acquire(blocking=False):
            return None  # another thread ends this window
        try:
            return self._decide(now)
        finally:
            self._deciding.release()

    def apply(self, change: FloodChange) -> None:
        """The tenants of ``change`` have moved: ``flooding`` says so from now on."""
        now = self._clock()
        for tenant in change.joining:
            self._busy_at[tenant] = now
        for tenant in change.leaving:
            self._busy_at.pop(tenant, None)
        self.flooding = (self.flooding | change.joining) - change.leaving

    def _decide(self, now: float) -> FloodChange | None:
        counts, self._counts = self._counts, collections.Counter()
        elapsed = now - self._window_start
        self._window_start = now
        total = sum(counts.values())
        floor = self.rate * elapsed
        joining = frozenset(
            tenant
            for tenant, sent in counts.items()
            if sent >= floor and sent >= FLOOD_SHARE * total and tenant not in self.flooding
        )
        leaving = set()
        for tenant in self.flooding:
            if counts.get(tenant, 0) >= floor / 2:
                self._busy_at[tenant] = now
            elif now - self._busy_at.get(tenant, now) >= CALM_SECONDS:
                leaving.add(tenant)
        if not joining and not leaving:
            return None
        return FloodChange(joining, frozenset(leaving))
