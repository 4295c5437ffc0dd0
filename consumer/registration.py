"""The worker's row in the registry: entered before it joins its group, left when it stops.
Other workers read it to tell a live lease owner from a gone one; the console lists it."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.stopping import StopRequest
from tenantq.errors import DatabaseAccessRefused, DatabaseUnavailable
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")


@dataclass(eq=False)
class Registration:
    """Enters and leaves the registry (the thread that runs the worker)."""

    settings: Settings
    worker_id: str
    queues: list[str]
    slots: int
    health: DatabaseHealth
    outage_too_long: Callable[[], bool]
    stop: StopRequest

    def enter(self) -> bool:
        """Enter the registry, waiting for the database as long as the outage limit allows
        (a worker started during a database restart waits, it does not crash). False when
        it gave up, or was told to stop first. Raises ``DatabaseAccessRefused`` when the
        database refuses the credentials or TLS."""
        store = JobStore.open(self.settings, self.worker_id, role="worker")
        attempt = 0
        try:
            while not self.stop.is_set():
                try:
                    store.register_worker(
                        socket.gethostname(), os.getpid(), self.queues, self.slots
                    )
                    self.health.succeeded()
                    return True
                except DatabaseUnavailable as error:
                    if isinstance(error, DatabaseAccessRefused):
                        raise  # wrong credentials: waiting would not help
                    self.health.failed(str(error), error.opened_at)
                    if self.outage_too_long():
                        return False
                    self.stop.wait(self.health.backoff(attempt))
                    attempt += 1
            return False
        finally:
            store.close()

    def leave(self) -> None:
        """Mark the worker stopped. With the database away, its heartbeat stops all the same:
        the registry sees it stale, and its leases expire."""
        store = JobStore.open(self.settings, self.worker_id, role="worker")
        try:
            store.stop_worker()
        except DatabaseUnavailable as error:
            log.warning("could not mark the worker stopped: %s", error)
        finally:
            store.close()
