"""The heartbeat: one statement per interval extends the leases of every job the process holds
(running or waiting for a slot) and refreshes the worker's registry row. It also carries two
signals back: an operator's cancellation, and leases that are no longer ours.

While the database is away the beats fail quietly (``DatabaseHealth`` says it once) and the
next beat tries again; a lease that ran out meanwhile is found lost at the first beat after.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.lease_calls import LeaseCalls
from tenantq.errors import DatabaseUnavailable
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")


class Heartbeat:
    def __init__(
        self,
        store: JobStore,
        health: DatabaseHealth,
        *,
        interval: float,
        lease_seconds: float,
        held: Callable[[], list[uuid.UUID]],
        usage: Callable[[], tuple[int, int]],
        on_cancel: Callable[[uuid.UUID], None],
        on_lost: Callable[[uuid.UUID], None],
    ) -> None:
        self._store = store
        self._health = health
        #: The store is shared with handler threads (``ctx.heartbeat()``, ``checkpoint()``).
        self._lock = threading.Lock()
        self._interval = interval
        self._lease_seconds = lease_seconds
        self._held = held
        self._usage = usage
        self._on_cancel = on_cancel
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tenantq-heartbeat", daemon=True)
        #: The running handlers' own calls (``ctx.heartbeat()``, ``ctx.checkpoint()``), on
        #: this store under this lock.
        self.calls = LeaseCalls(
            store,
            self._lock,
            lease_seconds,
            unreachable=lambda call, error: health.failed(str(error), error.opened_at),
            cancel_requested=on_cancel,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self._interval + 5)
        self._store.close()

    def beat(self) -> dict[uuid.UUID, bool]:
        """Renew now; returns {job id still ours: cancel requested}."""
        held = self._held()
        busy, slots = self._usage()
        with self._lock:
            renewed = self._store.renew_leases(held, self._lease_seconds, busy, slots)
        for job_id in held:
            if job_id not in renewed:
                self._on_lost(job_id)
            elif renewed[job_id]:
                self._on_cancel(job_id)
        return renewed

    def _main(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except DatabaseUnavailable as error:
                self._health.failed(str(error), error.opened_at)
                continue
            except Exception:  # a bug must not kill the heartbeat; the next beat retries
                log.exception("heartbeat failed; retrying next interval")
                continue
            self._health.succeeded()
