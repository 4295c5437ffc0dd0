"""The console's actions on one job: cancel, and run again now.

| job state                        | run again now                                          |
| -------------------------------- | ------------------------------------------------------ |
| dead                             | replayed from the DLQ by job id: the engine and audit  |
|                                  | row of ``tenantq dlq replay`` (actor ``web:<user>``)    |
| pending, runnable, retrying      | made due now in Postgres, then its envelope published  |
|                                  | to the main topic; the message that owned its wait     |
|                                  | finds it done later (claims are fenced: it runs once)  |
| leased, succeeded, canceled      | refused: running already, or finished for good         |
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tenantq import headers
from tenantq.dlq.actions import replay_dead_letters
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.dlq.reader import DeadLetterReadError
from tenantq.partitioner.murmur2 import default_partition
from tenantq.producer.publisher import Outgoing, Publisher
from tenantq.schemas.envelope import Envelope, encode_envelope
from tenantq.settings import Settings
from tenantq.states import LEASABLE_STATES
from tenantq.store import console as console_store
from tenantq.store.job_admin import cancel_job, get_job
from tenantq.topics import main_topic
from tenantq.web.database import Database


class JobActionError(Exception):
    """An action that cannot be done; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ActionResult:
    """What an action did, in a sentence, and the audit row when it wrote one."""

    message: str
    audit_id: int | None = None


def cancel(database: Database, job_id: uuid.UUID) -> ActionResult:
    """Cancel a job of a known queue (``tenantq jobs cancel``)."""
    with database.connection() as connection:
        row = get_job(connection, job_id)
        if row is None:
            raise JobActionError(404, f"no job {job_id}")
        state = cancel_job(connection, job_id, str(row["queue"]))
    if state is None:
        raise JobActionError(409, f"the job had already ended ({row['state']}): nothing to cancel")
    if state == "canceled":
        return ActionResult("canceled: it will not run")
    return ActionResult("running: cancellation requested (the handler sees ctx.cancelled)")


def run_again(
    settings: Settings, database: Database, job_id: uuid.UUID, *, actor: str
) -> ActionResult:
    """Run a dead or waiting job again now (see the module docstring)."""
    with database.connection() as connection:
        row = get_job(connection, job_id)
    if row is None:
        raise JobActionError(404, f"no job {job_id}")
    state, queue = str(row["state"]), str(row["queue"])
    if queue not in settings.queues:
        raise JobActionError(409, f"queue {queue!r} is not declared in this console's settings")
    if state == "dead":
        return _replay(settings, queue, job_id, actor)
    if state in LEASABLE_STATES:  # waiting for its turn: made due now
        return _due_now(settings, database, job_id)
    raise JobActionError(409, f"the job is {state}: there is nothing to run again")


def _replay(settings: Settings, queue: str, job_id: uuid.UUID, actor: str) -> ActionResult:
    try:
        report, audit_id = replay_dead_letters(
            settings, queue, DeadLetterFilter(job_ids=frozenset({job_id})), actor=actor
        )
    except DeadLetterReadError as error:
        raise JobActionError(503, str(error)) from None
    if report.replayed_ids:
        return ActionResult("replayed from the DLQ: it runs again now", audit_id)
    if report.matched == 0:
        raise JobActionError(
            409, "no dead letter of this job in the DLQ (purged?): it cannot be replayed"
        )
    reasons = "; ".join(sorted(report.skip_reasons)) or "the replay published nothing"
    raise JobActionError(409, f"not replayed: {reasons} (audit row {audit_id})")


def _due_now(settings: Settings, database: Database, job_id: uuid.UUID) -> ActionResult:
    with database.connection() as connection:
        row = console_store.job_run_now(connection, job_id)
    if row is None:
        raise JobActionError(409, "the job no longer waits (it started or ended meanwhile)")
    queue = str(row["queue"])
    topic = main_topic(settings.topic_prefix, queue)
    key = str(row["partition_key"]).encode()
    envelope = Envelope(
        job_id=row["id"],
        queue=queue,
        job_type=row["job_type"],
        tenant_id=row["tenant_id"],
        partition_key=row["partition_key"],
        payload=bytes(row["payload"] or b"{}"),
        created_at=row["created_at"],
        max_attempts=row["max_attempts"],
        idempotency_key=row["idempotency_key"],
        replay_count=int(row["replays"] or 0),
    )
    # Back where it came from when that was the main topic (tenant order and placement
    # kept), else where Kafka's default partitioner puts its key.
    partition = row["origin_partition"] if row["origin_topic"] == topic else None
    if partition is None:
        partition = default_partition(key, settings.queue(queue).partitions)
    message = Outgoing(
        topic,
        key,
        encode_envelope(envelope),
        [
            (headers.JOB_ID, str(job_id).encode()),
            (headers.JOB_TYPE, str(row["job_type"]).encode()),
            (headers.TENANT, str(row["tenant_id"]).encode()),
        ],
        partition,
    )
    publisher = Publisher(settings, client_id="tenantq-web")
    try:
        (acknowledged,) = publisher.publish([message])
    finally:
        publisher.close()
    if not acknowledged:
        raise JobActionError(
            503, "due now in Postgres, but Kafka did not acknowledge the message: try again"
        )
    return ActionResult("due now: published to the main topic")
