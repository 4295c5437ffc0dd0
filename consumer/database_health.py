"""Whether the worker's database is reachable, as its threads find out.

Every thread that talks to Postgres reports here (``failed`` / ``succeeded``). The first
failure turns the worker's view to *down*: one log line, the ``tenantq_database_up`` gauge at
0, and the poll loop stops claiming and pauses its partitions; the first success after that
turns it *up* again with one line saying how long it was away. Threads that retry wait
``backoff(attempt)``: capped exponential backoff with jitter, so that a fleet of workers does
not knock on a restarting server in step.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

log = logging.getLogger("tenantq.worker")

#: First and longest wait between two reconnection attempts of one thread.
BACKOFF_FIRST_SECONDS = 0.1
BACKOFF_CAP_SECONDS = 5.0
#: Exit status of a worker (member) that gave up on an unreachable database
#: (``database_outage_limit_seconds``); its supervisor then exits with it.
EXIT_DATABASE_GONE = 3


class DatabaseHealth:
    """Shared, thread-safe view of the database: up or down since when, and why."""

    def __init__(
        self,
        *,
        on_change: Callable[[bool], None] = lambda up: None,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._on_change = on_change
        self._clock = clock
        self._jitter = jitter
        self._lock = threading.Lock()
        self._up = True
        self._since = clock()
        #: When the database last came back: connections opened before are leftovers.
        self._recovered_at: float | None = None
        self._reason = ""

    @property
    def up(self) -> bool:
        return self._up

    def down_for(self) -> float:
        """Seconds the database has been unreachable (0 while it is up)."""
        with self._lock:
            return 0.0 if self._up else self._clock() - self._since

    def failed(self, reason: str, opened_at: float | None = None) -> None:
        """A thread could not reach the database (``reason``: one line, no secrets) over a
        connection opened at ``opened_at`` (monotonic; None: it could not even connect). A
        connection opened before the database came back is a leftover of that outage: it is
        dropped and opened again by its thread, without news of another outage."""
        with self._lock:
            if not self._up:
                return
            if (
                opened_at is not None
                and self._recovered_at is not None
                and opened_at < self._recovered_at
            ):
                return
            self._up, self._since, self._reason = False, self._clock(), reason
        log.warning("database unreachable: %s; results are kept and retried", reason)
        self._on_change(False)

    def succeeded(self) -> None:
        """A thread reached the database."""
        if self._up:  # the common case, without the lock
            return
        with self._lock:
            if self._up:
                return
            away = self._clock() - self._since
            self._up, self._since = True, self._clock()
            self._recovered_at = self._since
        log.warning("database reachable again after %.1fs", away)
        self._on_change(True)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before reconnection attempt ``attempt`` (0-based) of one thread."""
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_FIRST_SECONDS * 2.0 ** min(attempt, 16))
        return ceiling * (0.5 + 0.5 * self._jitter())
