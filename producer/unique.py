"""Unique jobs at enqueue: a request whose idempotency key already names a job of its queue
reports that job instead of publishing a new one.

| key already names a job with ...          | what ``enqueue`` does                         |
| ----------------------------------------- | --------------------------------------------- |
| the same job type, tenant and payload     | that job's ``JobRef``, ``created=False``; no  |
|                                           | message is published                          |
| another job type, tenant or payload       | raises ``JobConflict`` (nothing published)    |
| nothing (or the database is unreachable)  | published as usual                            |

The window: the key is looked up before publishing and the job's row is written only once
Kafka has acknowledged it (``PendingRecorder``; a row written first would be an orphan if the
publish failed). Two producers that enqueue one key within that window (milliseconds: one
lookup, one acknowledgement, one insert) are both accepted and both get ``created=True``;
the jobs collapse at claim, where the worker inserts only the first job that holds the key
and takes the other message as a duplicate by key. A lookup that fails (the database is
down) leaves the same guarantee: enqueue never depends on Postgres.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import psycopg

from tenantq.errors import JobConflict
from tenantq.producer.delivery import JobRef
from tenantq.producer.request import EncodedJob, EnqueueRequest
from tenantq.schemas.envelope import Envelope, decode_envelope
from tenantq.settings import Settings
from tenantq.store.engine import DeploymentConnection, connect
from tenantq.store.outbox import jobs_by_idempotency_keys

logger = logging.getLogger("tenantq.producer")


class KeyedJob(NamedTuple):
    """What a request must share with the job its idempotency key already names to be that
    job again (the digest is None for a row written before digests were kept)."""

    job_type: str
    tenant_id: str
    payload_sha256: bytes | None

    @classmethod
    def of(cls, envelope: Envelope) -> KeyedJob:
        """The job type, tenant and payload digest of ``envelope``."""
        return cls(envelope.job_type, envelope.tenant_id, hashlib.sha256(envelope.payload).digest())


def check_same_job(
    key: object, queue: str, holder_id: object, holder: KeyedJob, wanted: KeyedJob, kept: str
) -> None:
    """Raise ``JobConflict`` unless the job ``holder_id`` that ``key`` already names in
    ``queue`` is the job ``wanted`` again; ``kept`` says what became of the request (the
    same rule and words for the producer, the outbox and the recording producer)."""
    if holder != wanted:
        raise JobConflict(
            f"idempotency key {key!r} of queue {queue!r} already names job {holder_id} "
            f"({holder.job_type} of tenant {holder.tenant_id!r}) with another job type, "
            f"tenant or payload; {kept}"
        )


def idempotency_key_of(request: object) -> str | None:
    """The idempotency key of a request (an ``EnqueueRequest`` or a mapping)."""
    if isinstance(request, EnqueueRequest):
        return request.idempotency_key
    if isinstance(request, Mapping):
        key = request.get("idempotency_key")
        return key if isinstance(key, str) else None
    return None


class UniqueJobs:
    """Looks keyed requests up in ``tenantq_jobs`` over one lazily opened connection."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._connection: DeploymentConnection | None = None
        self._lock = threading.Lock()
        self._warned = False

    def existing(
        self, requests: Sequence[object], outgoing: Sequence[EncodedJob]
    ) -> dict[int, JobRef]:
        """{request index: the ``JobRef`` of the job its key already names}; raises
        ``JobConflict`` for a key that names a different job."""
        keyed = [index for index, request in enumerate(requests) if idempotency_key_of(request)]
        if not keyed:
            return {}
        wanted = {}
        for index in keyed:
            envelope = decode_envelope(
                outgoing[index].value, max_bytes=self._settings.max_message_bytes
            )
            wanted[index] = envelope
        rows = self._lookup(
            [envelope.queue for envelope in wanted.values()],
            [str(envelope.idempotency_key) for envelope in wanted.values()],
        )
        found: dict[int, JobRef] = {}
        for index, envelope in wanted.items():
            row = rows.get((envelope.queue, str(envelope.idempotency_key)))
            if row is None:
                continue
            job_id, job_type, tenant_id, digest, topic, partition, offset = row
            check_same_job(
                envelope.idempotency_key,
                envelope.queue,
                job_id,
                KeyedJob(job_type, tenant_id, None if digest is None else bytes(digest)),
                KeyedJob.of(envelope),
                "nothing was published",
            )
            found[index] = JobRef(
                uuid.UUID(str(job_id)),
                topic or outgoing[index].topic,
                -1 if partition is None else partition,
                -1 if offset is None else offset,
                False,
            )
        return found

    def _lookup(self, queues: list[str], keys: list[str]) -> dict[tuple[str, str], tuple[Any, ...]]:
        with self._lock:
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = connect(
                        self._settings, autocommit=True, application_name="tenantq-producer"
                    )
                rows = jobs_by_idempotency_keys(self._connection, queues, keys)
            except psycopg.Error as error:
                # Uniqueness then rests on the claim, as without database access.
                if not self._warned:
                    logger.warning("cannot look idempotency keys up (%s); the claim dedups", error)
                    self._warned = True
                self.close()
                return {}
        self._warned = False
        return {(row[0], row[1]): tuple(row[2:]) for row in rows}

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
