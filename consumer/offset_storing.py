"""``OffsetStoring``: where a worker's commit positions go once the jobs behind them are
durable: to the client at once, or, with ``offsets_wait_for_standbys``, behind the standbys
(``tenantq.consumer.standby_gate``), and what follows a failover that the gate reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tenantq.consumer.partitions import Partitions
from tenantq.consumer.standby_gate import StandbyGate, StandbyWatch
from tenantq.errors import DatabaseUnavailable
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")

#: ``Handover.rewind``: give up every partition and read them again, after giving back the
#: leases through the callable it is handed.
Rewind = Callable[[Callable[[], bool]], None]


class OffsetStoring:
    """Stores the commit positions that moved (poll thread); the standby watch, when there
    is one, reads the primary in a thread of its own."""

    def __init__(
        self,
        settings: Settings,
        worker_id: str,
        partitions: Partitions,
        consumer: Any,
    ) -> None:
        self._partitions = partitions
        self._consumer = consumer
        self._open_store: Callable[[], JobStore] = lambda: JobStore.open(
            settings, worker_id, role="worker"
        )
        self._watch: StandbyWatch | None = None
        self._gate: StandbyGate | None = None
        if settings.worker.offsets_wait_for_standbys:
            self._watch = StandbyWatch.for_worker(settings, worker_id)
            self._gate = StandbyGate(self._watch, partitions, consumer)

    def start(self) -> None:
        if self._watch is not None:
            self._watch.start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def store(self, rewind: Rewind) -> None:
        """Store the commit positions that moved: at once, or behind the standbys; after a
        failover the gate reports, ``rewind`` reads every partition again."""
        gate = self._gate
        if gate is None:
            self._partitions.store(self._consumer)
        elif not gate.store():
            rewind(self.release_own_leases)
            gate.rewound()

    def settle(self, timeout: float) -> None:
        """Before a commit: store what may be stored, waiting at most ``timeout`` seconds for
        the standbys."""
        if self._gate is None:
            self._partitions.store(self._consumer)
        else:
            self._gate.settle(timeout)

    def release_own_leases(self) -> bool:
        """After a failover: give back every lease this worker holds on the new primary (its
        jobs were given up); False when the database could not be reached."""
        store = self._open_store()
        try:
            released = store.release_own_leases(
                "the database failed over; the job runs again from its message"
            )
        except DatabaseUnavailable as error:
            log.warning("could not give back the leases after the failover: %s", error)
            return False
        finally:
            store.close()
        log.warning("gave back %d leases left from before the failover", len(released))
        return True
