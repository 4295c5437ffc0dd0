"""Pruning finished jobs in bounded batches, by hand (``tenantq prune``) or on a policy.

Only terminal jobs go (succeeded, dead, canceled: ``tenantq.store.retention`` says so in
SQL), each state after its own age, oldest first, ``batch_size`` per transaction; the
attempt rows of a job go with it, and an unsent outbox entry with its (canceled) job.

Uniqueness lasts as long as the row: once a job is pruned, its idempotency key is free and
``tenantq dlq replay`` refuses its dead letters (nothing says any more whether it ran).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from tenantq.background import ServiceLoop
from tenantq.settings import RetentionSettings, Settings
from tenantq.store import locks
from tenantq.store import retention as retention_store
from tenantq.store.engine import DeploymentConnection, LazyConnection
from tenantq.store.retention import Pruned

log = logging.getLogger("tenantq.retention")

Ages = dict[str, dt.timedelta | None]


def policy_ages(retention: RetentionSettings) -> Ages:
    """The age after which each terminal state is pruned, from the settings."""
    return {
        "succeeded": retention.succeeded,
        "dead": retention.dead,
        "canceled": retention.canceled,
    }


def prune_jobs(
    connection: DeploymentConnection,
    ages: Ages,
    *,
    batch_size: int,
    on_batch: Callable[[Pruned], None] | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> Pruned:
    """Delete every finished job older than its state's age (None: kept), batch by batch,
    until a batch finds nothing; returns the totals."""
    total = Pruned()
    while not stopping():
        batch = retention_store.job_prune_batch(connection, ages, batch_size)
        if not batch.total:
            break
        total.add(batch)
        if on_batch is not None:
            on_batch(batch)
    return total


class Pruner(ServiceLoop):
    """The retention policy as a ``BackgroundService``: every ``interval_seconds``, the one
    pruner of the deployment that holds the advisory lock
    (``tenantq.store.locks.RETENTION_PRUNER``, keyed by the topic prefix) deletes what the
    policy says of that deployment's rows; the pruners of its other workers find the lock
    taken and skip the round. Owns one connection."""

    def __init__(self, settings: Settings, *, name: str = "pruner") -> None:
        super().__init__(name)
        self.settings = settings
        self._database = LazyConnection(settings, "tenantq-pruner")
        #: What this pruner deleted since start.
        self.pruned = Pruned()
        self.workers_pruned = 0

    def run_round(self) -> float:
        retention = self.settings.retention
        connection = self._database.get()
        key = (locks.RETENTION_PRUNER, locks.name_key(self.settings.topic_prefix))
        if not locks.try_lock(connection, *key):
            return retention.interval_seconds
        try:
            pruned = prune_jobs(
                connection,
                policy_ages(retention),
                batch_size=retention.batch_size,
                stopping=lambda: self.stopping,
            )
            workers = retention_store.worker_prune(connection, retention.workers)
        finally:
            locks.unlock(connection, *key)
        self.pruned.add(pruned)
        self.workers_pruned += workers
        if pruned.total or workers:
            log.info(
                "pruned %d finished jobs (%s) with %d attempt rows, and %d worker rows",
                pruned.total,
                ", ".join(f"{count} {state}" for state, count in sorted(pruned.jobs.items())),
                pruned.attempts,
                workers,
            )
        return retention.interval_seconds

    def reset(self) -> None:
        self._database.close()
