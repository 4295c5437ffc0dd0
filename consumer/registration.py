"""The worker's row in the registry: entered before it joins its group, left when it stops.
Other workers read it to tell a live lease owner from a gone one; the console lists it."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.stopping import StopRequest
from tenantq.errors import DatabaseUnavailable
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")


class Registration:
    """Enters and leaves the registry (the thread that runs the worker)."""

    def __init__(
        self,
        settings: Settings,
        worker_id: str,
        queues: list[str],
        slots: int,
        health: DatabaseHealth,
        outage_too_long: Callable[[], bool],
        stop: StopRequest,
    ) -> None:
        self._settings = settings
        self._worker_id = worker_id
        self._queues = queues
        self._slots = slots
        self._health = health
        self._outage_too_long = outage_too_long
        self._stop = stop

    def enter(self) -> bool:
        """Enter the registry, waiting for the database as long as the outage limit allows
        (a worker started during a database restart waits, it does not crash). False when
        it gave up, or was told to stop first."""
        store = JobStore.open(self._settings, self._worker_id, role="worker")
        attempt = 0
        try:
            while not self._stop.is_set():
                try:
                    store.register_worker(
                        socket.gethostname(), os.getpid(), self._queues, self._slots
                    )
                    self._health.succeeded()
                    return True
                except DatabaseUnavailable as error:
                    self._health.failed(str(error), error.opened_at)
                    if self._outage_too_long():
                        return False
                    self._stop.wait(self._health.backoff(attempt))
                    attempt += 1
            return False
        finally:
            store.close()

    def leave(self) -> None:
        """Mark the worker stopped. With the database away, its heartbeat stops all the same:
        the registry sees it stale, and its leases expire."""
        store = JobStore.open(self._settings, self._worker_id, role="worker")
        try:
            store.stop_worker()
        except DatabaseUnavailable as error:
            log.warning("could not mark the worker stopped: %s", error)
        finally:
            store.close()
