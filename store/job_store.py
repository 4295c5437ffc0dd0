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
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from tenantq.errors import DatabaseAccessRefused, DatabaseUnavailable
from tenantq.settings import Settings
from tenantq.states import JobState
from tenantq.store import placement, quota_claim, statements
from tenantq.store.binary_arrays import (
    BigintArray,
    BoolArray,
    ByteaArray,
    Float8Array,
    TextArray,
    TimestamptzArray,
    UuidArray,
)
from tenantq.store.engine import connect
from tenantq.store.quota_claim import ClaimQuotas, Throttle
from tenantq.store.transient import (
    TRANSIENT_RETRIES,
    backoff_seconds,
    describe_database_error,
    is_access_refused,
    is_refusal,
    refused_access_line,
)
from tenantq.tenant_limits import ThrottleReason

if TYPE_CHECKING:
    from tenantq.schemas.envelope import Envelope

T = TypeVar("T")


class ClaimRequest(NamedTuple):
    """One message of a poll batch, as the store needs it.

    ``ClaimRequest``, ``Lease`` and ``Result`` are made once per job on the hot path: a named
    tuple is built in a third of the time of a frozen dataclass (which sets each field through
    ``object.__setattr__``), and a batch's columns are its rows transposed (``zip``)."""

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
        # ``_make`` with the fields in order: a third of the cost of a call by keyword, once
        # per job on the hot path.
        return cls._make(
            (
                envelope.job_id,
                queue,
                envelope.job_type,
                envelope.tenant_id,
                envelope.partition_key,
                envelope.payload,
                payload_sha256 or hashlib.sha256(envelope.payload).digest(),
                max_attempts,
                envelope.idempotency_key,
                topic,
                partition,
                offset,
                envelope.created_at,
            )
        )


#: Array parameter of the batch statements -> the ``ClaimRequest`` field it carries, in the
#: order of the fields.
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


#: How each array parameter of ``JOB_ROW_COLUMNS`` is sent, by name (``binary_arrays``).
_JOB_ROW_ARRAYS: dict[str, Callable[[Sequence[Any]], Any]] = {
    "ids": UuidArray,
    "queues": TextArray,
    "job_types": TextArray,
    "tenant_ids": TextArray,
    "partition_keys": TextArray,
    "payloads": ByteaArray,
    "payload_hashes": ByteaArray,
    "max_attempts": BigintArray,
    "idempotency_keys": TextArray,
    "origin_topics": TextArray,
    "origin_partitions": BigintArray,
    "origin_offsets": BigintArray,
    "enqueued_ats": TimestamptzArray,
}


def job_row_arrays(requests: Sequence[ClaimRequest]) -> dict[str, Any]:
    """The columns of ``requests`` as the arrays the batch statements ``unnest``."""
    columns = zip(*requests, strict=True) if requests else ((),) * len(JOB_ROW_COLUMNS)
    return {
        parameter: _JOB_ROW_ARRAYS[parameter](column)
        for parameter, column in zip(JOB_ROW_COLUMNS, columns, strict=True)
    }


class Lease(NamedTuple):
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
    """The state of a job the claim did not take. ``of_another_deployment``: the job id is
    another deployment's (a forged or misrouted message); nothing else of its row is read,
    and it is reported as dead, so whatever reads only the state leaves it alone."""

    job_id: uuid.UUID
    state: JobState
    lease_owner: str | None
    attempts: int
    max_attempts: int
    due: bool
    cancel_requested: bool
    payload_sha256: bytes | None
    lease_left_seconds: float
    crashes: int = 0
    of_another_deployment: bool = False
    #: Another transaction holds the job's row (the claim skipped it rather than wait).
    locked: bool = False

    @classmethod
    def in_another_deployment(cls, job_id: uuid.UUID) -> JobStatus:
        """A job id that another deployment on the database holds."""
        return cls(job_id, JobState.DEAD, None, 0, 1, False, False, None, 0.0, 0, True)


class Completed(NamedTuple):
    """What a result batch did: the jobs whose result was applied, and those set aside
    because another transaction held their row (written nothing; to be written again). The
    rest were stale and refused."""

    applied: set[uuid.UUID]
    locked: set[uuid.UUID]


class Result(NamedTuple):
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


class _RowLocked(Exception):
    """A statement with a bounded lock wait met a row another transaction held longer."""


def _complete(cursor: psycopg.Cursor[Any], statement: str, parameters: dict[str, Any]) -> Completed:
    """A results statement run: the jobs whose result was applied and those set aside."""
    cursor.execute(statement, parameters)
    done = Completed(set(), set())
    for job_id, locked in cursor.fetchall():
        (done.locked if locked else done.applied).add(job_id)
    return done


def _complete_unless_locked(cursor: psycopg.Cursor[Any], parameters: dict[str, Any]) -> Completed:
    """The results written without locking their rows first (all of them), or
    ``_RowLocked`` (none of them) when a row lock outlasted the statement's bound."""
    try:
        return _complete(cursor, statements.JOB_COMPLETE_BATCH_BOUNDED_WAIT, parameters)
    except psycopg.errors.LockNotAvailable as error:
        raise _RowLocked from error


class JobStore:
    """Postgres access of one worker thread: one connection, opened on first use and opened
    again after the database dropped it (never shared across threads). Every statement is
    scoped to ``deployment`` (the topic prefix), bound when the store is made (``open``:
    the settings').

    Every method runs in its own short transaction and raises ``DatabaseUnavailable`` when
    the server cannot be reached (the connection is dropped, the next call reconnects), or the
    psycopg error itself when the server refused the rows sent (``tenantq.store.transient``).
    """

    def __init__(
        self,
        connect_to_database: Callable[[], psycopg.Connection[Any]],
        owner: str,
        *,
        deployment: str,
    ) -> None:
        self._connect = connect_to_database
        self._connection: psycopg.Connection[Any] | None = None
        #: ``time.monotonic()`` when the connection was opened.
        self._opened_at: float | None = None
        self.owner = owner
        self.deployment = deployment

    @classmethod
    def open(cls, settings: Settings, owner: str, *, role: str = "worker") -> JobStore:
        """A store of ``owner`` on the settings' database (connected on first use)."""
        return cls(
            lambda: connect(
                settings,
                autocommit=True,
                application_name=f"tenantq-{role} {owner}",
                generic_plans=True,
            ),
            owner,
            deployment=settings.topic_prefix,
        )

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except psycopg.Error:
                pass

    # -- transactions --------------------------------------------------------------------------

    def _run(self, work: Callable[[psycopg.Cursor[Any]], T], *, atomic: bool = False) -> T:
        """``work`` on the connection, retried through transient failures. Each hot-path
        statement is one atomic statement: on an autocommit connection it runs as its own
        transaction, without the BEGIN and COMMIT round trips a transaction block adds (two
        of three per statement). ``atomic``: ``work`` runs several statements, in one block."""
        for attempt in range(TRANSIENT_RETRIES + 1):
            try:
                if self._connection is None or self._connection.closed:
                    self._opened_at = None
                    self._connection = self._connect()
                    self._opened_at = time.monotonic()
                connection = self._connection
                if connection.autocommit and not atomic:
                    with connection.cursor() as cursor:
                        return work(cursor)
                with connection.transaction(), connection.cursor() as cursor:
                    return work(cursor)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as error:
                if attempt == TRANSIENT_RETRIES:
                    raise self._unavailable(f"still failing after retries: {error}") from error
                time.sleep(backoff_seconds(attempt))
            except psycopg.errors.UniqueViolation:
                # Two workers inserting different jobs with one idempotency key at once: the
                # retry sees the winner and leaves the loser unclaimed.
                if attempt == TRANSIENT_RETRIES:
                    raise
            except psycopg.Error as error:
                if is_refusal(error):
                    raise
                if is_access_refused(error):
                    self.close()
                    raise DatabaseAccessRefused(refused_access_line(error)) from error
                raise self._unavailable(describe_database_error(error)) from error
            except OSError as error:  # the socket itself failed before libpq could say so
                raise self._unavailable(str(error)) from error
        raise AssertionError("unreachable")

    def _unavailable(self, reason: str) -> DatabaseUnavailable:
        """The connection is given up; the error to raise, with when it had been opened."""
        opened = self._opened_at
        self.close()
        return DatabaseUnavailable(reason, opened)

    # -- claim -------------------------------------------------------------------------------------

    def _claim_parameters(
        self,
        requests: Sequence[ClaimRequest],
        lease_seconds: float,
        stale_owner_seconds: float,
        crash_budget: int,
        adoptable: Sequence[uuid.UUID],
    ) -> dict[str, Any]:
        """The parameters both claim statements take: the jobs' rows as arrays, this owner and
        deployment, the lease and crash settings, the jobs we may have leased already."""
        return {
            **job_row_arrays(requests),
            "owner": self.owner,
            "deployment": self.deployment,
            "lease_seconds": lease_seconds,
            "stale_owner_seconds": stale_owner_seconds,
            "crash_budget": crash_budget,
            "adoptable": UuidArray(list(adoptable)),
        }

    def claim_batch(
        self,
        requests: Sequence[ClaimRequest],
        lease_seconds: float,
        stale_owner_seconds: float,
        crash_budget: int,
        adoptable: Sequence[uuid.UUID] = (),
    ) -> dict[uuid.UUID, Lease]:
        """Lease what can be leased of ``requests`` (``JOB_CLAIM_BATCH``); ``adoptable``: jobs
        an earlier try of this claim may have leased to us already."""
        if not requests:
            return {}
        parameters = self._claim_parameters(
            requests, lease_seconds, stale_owner_seconds, crash_budget, adoptable
        )

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, Lease]:
            # Rows in binary: a uuid, ints, a bool and timestamps are read from their bytes
            # rather than parsed from text (0.3 us less per claimed job).
            cursor.execute(statements.JOB_CLAIM_BATCH, parameters, binary=True)
            return {row[0]: Lease(*row) for row in cursor.fetchall()}

        return self._run(work)

    def claim_batch_limited(
        self,
        requests: Sequence[ClaimRequest],
        quotas: ClaimQuotas,
        lease_seconds: float,
        stale_owner_seconds: float,
        crash_budget: int,
        adoptable: Sequence[uuid.UUID] = (),
    ) -> tuple[dict[uuid.UUID, Lease], dict[uuid.UUID, Throttle]]:
        """``claim_batch`` with the limits of ``quotas.limited_tenants`` applied
        (``JOB_CLAIM_BATCH_LIMITED``): the leases taken, and the jobs left waiting with the
        limit that held each."""
        if not requests:
            return {}, {}
        parameters = {
            **self._claim_parameters(
                requests, lease_seconds, stale_owner_seconds, crash_budget, adoptable
            ),
            **quotas.parameters(requests),
        }

        def work(
            cursor: psycopg.Cursor[Any],
        ) -> tuple[dict[uuid.UUID, Lease], dict[uuid.UUID, Throttle]]:
            cursor.execute(quota_claim.JOB_CLAIM_BATCH_LIMITED, parameters, binary=True)
            rows = cursor.fetchall()
            # Once per job: a comprehension, and the throttles looked for only when some job
            # was held back (a row is a lease or a throttle, of distinct jobs).
            leases = {row[0]: Lease._make(row[:8]) for row in rows if row[8] is None}
            throttles = (
                {}
                if len(leases) == len(rows)
                else {
                    row[0]: Throttle(ThrottleReason(row[8]), float(row[9]))
                    for row in rows
                    if row[8] is not None
                }
            )
            return leases, throttles

        return self._run(work)

    def states_of(self, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, JobStatus]:
        ids = list(job_ids)
        if not ids:
            return {}

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, JobStatus]:
            cursor.execute(statements.JOB_STATE_BATCH, {"ids": ids, "deployment": self.deployment})
            found = {}
            for row in cursor.fetchall():
                if not row[-1]:
                    found[row[0]] = JobStatus.in_another_deployment(row[0])
                    continue
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
                    crashes,
                    locked,
                    _ours,
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
                    crashes,
                    locked=bool(locked),
                )
            return found

        return self._run(work)

    def bury_exhausted(self, job_ids: Iterable[uuid.UUID], crash_budget: int) -> set[uuid.UUID]:
        return self._ids_of(statements.JOB_BURY_EXHAUSTED, job_ids, crash_budget=crash_budget)

    def cancel_waiting(self, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        return self._ids_of(statements.JOB_CANCEL_WAITING, job_ids)

    def _ids_of(
        self, statement: str, job_ids: Iterable[uuid.UUID], **parameters: Any
    ) -> set[uuid.UUID]:
        ids = list(job_ids)
        if not ids:
            return set()

        def work(cursor: psycopg.Cursor[Any]) -> set[uuid.UUID]:
            cursor.execute(statement, {"ids": ids, "deployment": self.deployment, **parameters})
            return {row[0] for row in cursor.fetchall()}

        return self._run(work)

    # -- results -----------------------------------------------------------------------------------

    def complete_batch(self, results: Sequence[Result], *, again: bool = False) -> Completed:
        """Write results fenced, never waiting for a row lock beyond 50 ms
        (``JOB_COMPLETE_BATCH_BOUNDED_WAIT``); return the jobs whose result was applied and
        those set aside, locked (the rest were stale and refused). ``again``:
        this batch may have been applied already by a try whose connection dropped
        (``JOB_COMPLETE_BATCH_AGAIN``)."""
        if not results:
            return Completed(set(), set())
        parameters = {
            "ids": UuidArray([r.job_id for r in results]),
            "attempts": BigintArray([r.attempt for r in results]),
            "outcomes": TextArray([r.outcome for r in results]),
            "states": TextArray([r.state.value for r in results]),
            "error_classes": TextArray([printable(r.error_class, 200) for r in results]),
            "error_messages": TextArray([printable(r.error_message) for r in results]),
            "delays": Float8Array([_bounded_delay(r.delay_seconds) for r in results]),
            "give_backs": BoolArray([r.give_back for r in results]),
            "durations": BigintArray([r.duration_ms for r in results]),
            "started_ats": TimestamptzArray([r.started_at for r in results]),
            "owner": self.owner,
            "deployment": self.deployment,
        }

        if not again:
            try:
                return self._run(lambda cursor: _complete_unless_locked(cursor, parameters))
            except _RowLocked:
                pass  # written below, the locked jobs set aside
        statement = statements.JOB_COMPLETE_BATCH_AGAIN if again else statements.JOB_COMPLETE_BATCH
        return self._run(lambda cursor: _complete(cursor, statement, parameters))

    def count_crashes(
        self, crashed: Sequence[tuple[uuid.UUID, int, dt.datetime | None, int]], reason: str
    ) -> dict[uuid.UUID, int]:
        """Attempts (job id, attempt, started at, duration ms) whose process died: each job
        counts the crash; returns the new crash count of every job still ours (fenced)."""
        if not crashed:
            return {}
        ids, attempts, started, durations = (list(column) for column in zip(*crashed, strict=True))
        parameters = {
            "ids": ids,
            "attempts": attempts,
            "started_ats": started,
            "durations": durations,
            "owner": self.owner,
            "deployment": self.deployment,
            "reason": printable(reason),
        }

        def work(cursor: psycopg.Cursor[Any]) -> dict[uuid.UUID, int]:
            cursor.execute(statements.JOB_CRASH_BATCH, parameters)
            return {row[0]: row[1] for row in cursor.fetchall()}

        return self._run(work)

    # -- leases ------------------------------------------------------------------------------------

    def renew_leases(
        self,
        job_ids: Iterable[uuid.UUID],
        lease_seconds: float,
        running: int | None,
        slots: int | None,
    ) -> dict[uuid.UUID, bool]:
        """Extend our leases; return {job id still ours: cancel requested}. ``running`` and
        ``slots`` refresh the worker's registry row (None: leave them)."""
        parameters = {
            "ids": list(job_ids),
            "lease_seconds": lease_seconds,
            "owner": self.owner,
            "deployment": self.deployment,
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
            "deployment": self.deployment,
            "progress": Jsonb(progress),
        }

        def work(cursor: psycopg.Cursor[Any]) -> bool:
            cursor.execute(statements.JOB_CHECKPOINT, parameters)
            return cursor.fetchone() is not None

        return self._run(work)

    # -- workers -----------------------------------------------------------------------------------

    def register_worker(self, hostname: str, pid: int, queues: list[str], slots: int) -> None:
        parameters = {
            "deployment": self.deployment,
            "id": self.owner,
            "hostname": hostname,
            "pid": pid,
            "queues": queues,
            "slots": slots,
        }
        self._run(lambda cursor: cursor.execute(statements.WORKER_REGISTER, parameters))

    def stop_worker(self) -> None:
        parameters = {"deployment": self.deployment, "id": self.owner}
        self._run(lambda cursor: cursor.execute(statements.WORKER_STOP, parameters))

    def enter_lane(self, queue: str, tenant_id: str, reason: str) -> bool:
        """Move a tenant that floods its partition to the queue's hot lane (a placement row of
        a worker's: ``tenantq.store.placement.LANE_ENTER``); False when an operator's placement
        of the tenant stands."""

        def work(cursor: psycopg.Cursor[Any]) -> bool:
            cursor.execute(
                placement.LANE_ENTER,
                {"deployment": self.deployment, "queue": queue, "tenant_id": tenant_id,
                 "updated_by": self.owner, "reason": reason},
            )  # fmt: skip
            moved = cursor.fetchone() is not None
            if moved:
                placement.placement_changed(cursor, self.deployment, queue)
            return moved

        # The notification goes out with the placement row, or not at all.
        return self._run(work, atomic=True)

    def worker_crashed(self, worker_id: str, reason: str) -> int:
        """A worker process died: stop it in the registry and free its leases at once
        (``WORKER_CRASHED``); returns how many jobs it held."""
        parameters = {"deployment": self.deployment, "id": worker_id, "reason": printable(reason)}

        def work(cursor: psycopg.Cursor[Any]) -> int:
            cursor.execute(statements.WORKER_CRASHED, parameters)
            return len(cursor.fetchall())

        return self._run(work)

    def release_own_leases(self, reason: str) -> set[uuid.UUID]:
        """Give back every lease this store's owner holds (``JOB_RELEASE_OWNER_LEASES``: after
        a failover, leases of a history the worker no longer follows); the jobs released."""
        parameters = {
            "deployment": self.deployment,
            "owner": self.owner,
            "reason": printable(reason),
        }

        def work(cursor: psycopg.Cursor[Any]) -> set[uuid.UUID]:
            cursor.execute(statements.JOB_RELEASE_OWNER_LEASES, parameters)
            return {row[0] for row in cursor.fetchall()}

        return self._run(work)


#: The longest wait a result may ask for (ten years): more is a bug, and would overflow the
#: database's timestamps.
MAX_DELAY_SECONDS = 10 * 365 * 86_400.0


def printable(text: str | None, limit: int = 2_000) -> str | None:
    """Text as the ledger can hold it: error messages are for people (a 10 MB repr is not),
    and PostgreSQL text cannot hold a NUL character."""
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", "\\0")
    if len(text) > limit:
        text = text[:limit] + "…"
    return text


def _bounded_delay(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    if seconds != seconds or seconds < 0:  # NaN or negative: now
        return 0.0
    return min(seconds, MAX_DELAY_SECONDS)
