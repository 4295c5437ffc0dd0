"""The job store: one method per named statement of ``tenantq.store.statements``.

Each method runs in its own short transaction. Deadlocks and serialization failures are retried
in-process a few times (they are transient by definition) before they surface.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from tenantq.settings import Settings
from tenantq.states import JobState
from tenantq.store import statements
from tenantq.store.engine import connect
from tenantq.store.transient import TRANSIENT_RETRIES, backoff_seconds

if TYPE_CHECKING:
    from tenantq.schemas.envelope import Envelope

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """One message of a poll batch, as the store needs it."""

    job_id: uuid.UUID
    queue: str
    job_type: str
    tenant_id: str
    partition_key: str
    payload: bytes
    payload_sha256: bytes
    max_attempts: int
    idempotency_key: str | None
    origin_topic: str
    origin_partition: int
    origin_offset: int
    enqueued_at: dt.datetime | None

    @classmethod
    def of(
        cls,
        envelope: Envelope,
        *,
        queue: str,
        max_attempts: int,
        origin: tuple[str, int, int],
        payload_sha256: bytes | None = None,
    ) -> ClaimRequest:
        """The row of ``envelope``, read from ``origin`` (topic, partition, offset)."""
        topic, partition, offset = origin
        return cls(
            job_id=envelope.job_id,
            queue=queue,
            job_type=envelope.job_type,
            tenant_id=envelope.tenant_id,
            partition_key=envelope.partition_key,
            payload=envelope.payload,
            payload_sha256=payload_sha256 or hashlib.sha256(envelope.payload).digest(),
            max_attempts=max_attempts,
            idempotency_key=envelope.idempotency_key,
            origin_topic=topic,
            origin_partition=partition,
            origin_offset=offset,
            enqueued_at=envelope.created_at,
        )


#: Array parameter of the batch statements -> the ``ClaimRequest`` field it carries.
JOB_ROW_COLUMNS: dict[str, str] = {
    "ids": "job_id",
    "queues": "queue",
    "job_types": "job_type",
    "tenant_ids": "tenant_id",
    "partition_keys": "partition_key",
    "payloads": "payload",
    "payload_hashes": "payload_sha256",
    "max_attempts": "max_attempts",
    "idempotency_keys": "idempotency_key",
    "origin_topics": "origin_topic",
    "origin_partitions": "origin_partition",
    "origin_offsets": "origin_offset",
    "enqueued_ats": "enqueued_at",
}


def job_row_arrays(requests: Sequence[ClaimRequest]) -> dict[str, list[Any]]:
    """The columns of ``requests`` as the arrays the batch statements ``unnest``."""
    return {
        parameter: [getattr(request, field) for request in requests]
        for parameter, field in JOB_ROW_COLUMNS.items()
    }


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease the claim took: ``attempt`` is the fencing token."""

    job_id: uuid.UUID
    attempt: int
    max_attempts: int
    progress: Any
    replays: int
    inserted: bool
    lease_until: dt.datetime
    #: When the lease was taken, by the database clock: the attempt's ``started_at``.
    claimed_at: dt.datetime


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The state of a job the claim did not take."""

    job_id: uuid.UUID
    state: JobState
    lease_owner: str | None
    attempts: int
    max_attempts: int
    due: bool
    cancel_requested: bool
    payload_sha256: bytes | None
    lease_left_seconds: float


@dataclass(frozen=True, slots=True)
class Result:
    """How one attempt ended, to be written fenced."""

    job_id: uuid.UUID
    attempt: int
    outcome: str
    state: JobState
    error_class: str | None = None
    error_message: str | None = None
    delay_seconds: float | None = None
    give_back: bool = False
    duration_ms: int | None = None
    started_at: dt.datetime | None = None


class JobStore:
    """Postgres access of one worker process (one connection; not shared across threads)."""

    def __init__(self, connection: psycopg.Connection[Any], owner: str) -> None:
        self.connection = connection
        self.owner = owner

    @classmethod
    def open(cls, settings: Settings, owner: str) -> JobStore:
        return cls(connect(settings, application_name=f"tenantq-worker {owner}"), owner)

    def close(self) -> None:
        self.connection.close()

    # -- transactions --------------------------------------------------------------------------

    def _run(self, work: Callable[[psycopg.Cursor[Any]], T]) -> T:
        for attempt in range(TRANSIENT_RETRIES + 1):
            try:
                with self.connection.transaction(), self.connection.cursor() as cursor:
                    return work(cursor)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == TRANSIENT_RETRIES:
                    raise
                time.sleep(backoff_seconds(attempt))
            except psycopg.errors.UniqueViolation:
                # Two workers inserting different jobs with one idempotency key at once: the
                # retry sees the winner and leaves the loser unclaimed.
                if attempt == TRANSIENT_RETRIES:
                    raise
        raise AssertionError("unreachable")

    # -- claim -------------------------------------------------------------------------------------

    def claim_batch(
        self, requests: Sequence[ClaimRequest], lease_seconds: float, stale_owner_seconds: float
    ) -> dict[uuid.UUID, Lease]:
        if not requests:
            return {}
        parameters = {
            **job_row_arrays(requests),
            "owner": self.owner,
            "lease_seconds": lease_seconds,
            "stale_owner_seconds": stale_owner_seconds,
        }

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, Lease]:
            cursor.execute(statements.JOB_CLAIM_BATCH, parameters)
            return {row[0]: Lease(*row) for row in cursor.fetchall()}

        return self._run(work)

    def states_of(self, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, JobStatus]:
        ids = list(job_ids)
        if not ids:
            return {}

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, JobStatus]:
            cursor.execute(statements.JOB_STATE_BATCH, {"ids": ids})
            found = {}
            for row in cursor.fetchall():
                (
                    job_id,
                    state,
                    owner,
                    _until,
                    attempts,
                    max_attempts,
                    due,
                    cancel,
                    digest,
                    _error_class,
                    _error_message,
                    lease_left,
                ) = row
                found[job_id] = JobStatus(
                    job_id,
                    JobState(state),
                    owner,
                    attempts,
                    max_attempts,
                    bool(due),
                    bool(cancel),
                    digest,
                    float(lease_left or 0.0),
                )
            return found

        return self._run(work)

    def bury_exhausted(self, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        return self._ids_of(statements.JOB_BURY_EXHAUSTED, job_ids)

    def cancel_waiting(self, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        return self._ids_of(statements.JOB_CANCEL_WAITING, job_ids)

    def _ids_of(self, statement: str, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        ids = list(job_ids)
        if not ids:
            return set()

        def work(cursor: psycopg.Cursor[Any]) -> set[uuid.UUID]:
            cursor.execute(statement, {"ids": ids})
            return {row[0] for row in cursor.fetchall()}

        return self._run(work)

    # -- results -----------------------------------------------------------------------------------

    def complete_batch(self, results: Sequence[Result]) -> set[uuid.UUID]:
        """Write results fenced; return the job ids whose result was applied (the rest were
        stale and refused)."""
        if not results:
            return set()
        parameters = {
            "ids": [r.job_id for r in results],
            "attempts": [r.attempt for r in results],
            "outcomes": [r.outcome for r in results],
            "states": [r.state.value for r in results],
            "error_classes": [r.error_class for r in results],
            "error_messages": [_clip(r.error_message) for r in results],
            "delays": [r.delay_seconds for r in results],
            "give_backs": [r.give_back for r in results],
            "durations": [r.duration_ms for r in results],
            "started_ats": [r.started_at for r in results],
            "owner": self.owner,
        }

        def work(cursor: psycopg.Cursor[Any]) -> set[uuid.UUID]:
            cursor.execute(statements.JOB_COMPLETE_BATCH, parameters)
            return {row[0] for row in cursor.fetchall()}

        return self._run(work)

    # -- leases ------------------------------------------------------------------------------------

    def renew_leases(
        self, job_ids: Iterable[uuid.UUID], lease_seconds: float, running: int, slots: int
    ) -> dict[uuid.UUID, bool]:
        """Extend our leases; return {job id still ours: cancel requested}."""
        parameters = {
            "ids": list(job_ids),
            "lease_seconds": lease_seconds,
            "owner": self.owner,
            "running": running,
            "slots": slots,
        }

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, bool]:
            cursor.execute(statements.LEASE_RENEW, parameters)
            return {row[0]: bool(row[1]) for row in cursor.fetchall()}

        return self._run(work)

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        parameters = {
            "id": job_id,
            "attempt": attempt,
            "owner": self.owner,
            "progress": Jsonb(progress),
        }

        def work(cursor: psycopg.Cursor[Any]) -> bool:
            cursor.execute(statements.JOB_CHECKPOINT, parameters)
            return cursor.fetchone() is not None

        return self._run(work)

    # -- workers -----------------------------------------------------------------------------------

    def register_worker(self, hostname: str, pid: int, queues: list[str], slots: int) -> None:
        parameters = {
            "id": self.owner,
            "hostname": hostname,
            "pid": pid,
            "queues": queues,
            "slots": slots,
        }
        self._run(lambda cursor: cursor.execute(statements.WORKER_REGISTER, parameters))

    def stop_worker(self) -> None:
        self._run(lambda cursor: cursor.execute(statements.WORKER_STOP, {"id": self.owner}))


def _clip(message: str | None, limit: int = 2_000) -> str | None:
    """Error messages are for people; a 10 MB repr is not."""
    if message is None or len(message) <= limit:
        return message
    return message[:limit] + "…"
