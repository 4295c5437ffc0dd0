"""The failed-login limiter: how many wrong tokens the console hears before it stops listening.

Every wrong token (sign-in form or ``Authorization: Bearer``) is counted in a sliding minute,
per client address and over all clients:

| within the last minute                            | a token presented now                 |
| ------------------------------------------------- | ------------------------------------- |
| fewer than ``login_failures_per_client`` wrong    | compared; a wrong one is counted      |
| tokens from this client, fewer than               | (log event ``web.login.failed``,      |
| ``login_failures_overall`` from all               | metric ``tenantq_web_login_failures``) |
| either limit reached                              | refused unread: 429 with Retry-After  |
|                                                   | until the oldest failure leaves the   |
|                                                   | minute (``web.login.refused``, once   |
|                                                   | per client and minute; metric         |
|                                                   | ``tenantq_web_logins_refused``)       |

A refused attempt is not compared, so it is not counted either: an attacker who keeps trying
gets nothing, and the limiter's memory stays bounded by the limits. A client is an IPv4
address or an IPv6 /64 (one host's usual allocation). Sessions already signed in are not
token checks and keep working while the limiter refuses.

The counts live in the console process: with N console processes the limits are N times
looser. That is accepted because the limiter is the second line: a token of at least
``MIN_TOKEN_LENGTH`` characters cannot be guessed at a few hundred tries a minute anyway.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

#: The sliding window, in seconds.
WINDOW_SECONDS = 60.0

Limit = Literal["client", "overall"]


@dataclass(frozen=True)
class Refusal:
    """A token check refused: which limit, and in how many whole seconds to try again."""

    limit: Limit
    retry_after: int


class LoginEvents(Protocol):
    """What the limiter reports (the console logs each and counts it in a metric)."""

    def token_failed(self, client: str, via: str, failures: int) -> None:
        """A wrong token from ``client`` (``via`` "login" or "bearer"); ``failures`` from it
        within the window, this one included."""

    def token_refused(self, client: str, refusal: Refusal, *, first: bool) -> None:
        """A token check refused unread; ``first`` for the first of this client's minute."""


def client_key(address: str) -> str:
    """What the per-client count is keyed by: the address, or its /64 for IPv6."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


@dataclass(eq=False, repr=False, slots=True, kw_only=True)
class FailedLogins:
    """Counts wrong tokens and refuses token checks past the limits (module docstring)."""

    per_client: int
    overall: int
    events: LoginEvents
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    #: The times of the wrong tokens within the window: from every client, and per client.
    _all: deque[float] = field(init=False, default_factory=deque)
    _by_client: dict[str, deque[float]] = field(init=False, default_factory=dict)
    #: When each client's last refusal was logged (one log line per client and minute).
    _refusal_logged: dict[str, float] = field(init=False, default_factory=dict)

    def refusal(self, address: str) -> Refusal | None:
        """None if a token from ``address`` may be compared now, else why not and for how
        long (reported to the events)."""
        key = client_key(address)
        with self._lock:
            now = self.clock()
            self._forget_before(now - WINDOW_SECONDS)
            refusal = None
            mine = self._by_client.get(key)
            if mine is not None and len(mine) >= self.per_client:
                refusal = Refusal("client", _seconds_until(mine[0] + WINDOW_SECONDS, now))
            elif len(self._all) >= self.overall:
                refusal = Refusal("overall", _seconds_until(self._all[0] + WINDOW_SECONDS, now))
            if refusal is None:
                return None
            # One log line per refused client and minute, and one for the overall limit (not
            # one per address: those are not bounded by anything but the attacker's range).
            logged_as = key if refusal.limit == "client" else "*"
            first = logged_as not in self._refusal_logged
            if first:
                self._refusal_logged[logged_as] = now
        self.events.token_refused(address, refusal, first=first)
        return refusal

    def failed(self, address: str, via: str) -> None:
        """Count a wrong token from ``address``."""
        key = client_key(address)
        with self._lock:
            now = self.clock()
            self._forget_before(now - WINDOW_SECONDS)
            self._all.append(now)
            mine = self._by_client.setdefault(key, deque())
            mine.append(now)
            failures = len(mine)
        self.events.token_failed(address, via, failures)

    def _forget_before(self, horizon: float) -> None:
        # Only compared tokens are counted, and none is compared past the overall limit: the
        # clients remembered here are at most about that many, so the sweep stays short.
        while self._all and self._all[0] <= horizon:
            self._all.popleft()
        for key in list(self._by_client):
            times = self._by_client[key]
            while times and times[0] <= horizon:
                times.popleft()
            if not times:
                del self._by_client[key]
        for key in [key for key, at in self._refusal_logged.items() if at <= horizon]:
            del self._refusal_logged[key]


def _seconds_until(moment: float, now: float) -> int:
    return max(1, math.ceil(moment - now))
