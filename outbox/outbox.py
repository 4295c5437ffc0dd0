"""``tenantq.Outbox``: enqueue a job inside the caller's open transaction.

The job is validated, encoded and placed exactly as ``Producer.enqueue`` would (the same
``RequestPreparer``), then one statement in the caller's transaction writes its row
(``pending``, so ``tenantq jobs show``, the depth and the oldest-runnable age see it at once)
and its outbox entry (the Kafka record, byte for byte). Both commit with the caller's own
writes or neither does; the relay publishes committed entries.

What the caller may pass as ``conn``:

| connection                                   | how the statement runs                 |
| -------------------------------------------- | -------------------------------------- |
| ``psycopg.Connection``                       | a cursor of it                         |
| ``sqlalchemy.engine.Connection``             | ``exec_driver_sql`` (its transaction)  |
| ``sqlalchemy.orm.Session``                   | its connection (begun if need be)      |
| ``psycopg.AsyncConnection`` (``enqueue_async``) | an async cursor of it               |

Partitions are chosen with the declared partition counts (``TENANTQ_QUEUES``, which
``tenantq topics ensure`` keeps equal to the topics'), so an enqueue never waits for Kafka.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, Unpack

import psycopg

from tenantq.app import App, resolve_max_attempts
from tenantq.closing import ClosedOnExit
from tenantq.enqueue_request import EnqueueOptions
from tenantq.errors import ConfigurationError, JobConflict
from tenantq.job_ids import new_job_id_ints
from tenantq.observability.tracing import Publication, PublicationScope, job_tracer
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.request import EnqueueRequest, RequestPreparer
from tenantq.producer.unique import KeyedJob, check_same_job
from tenantq.schemas.envelope import decode_envelope
from tenantq.settings import Settings, load_settings
from tenantq.store import outbox as outbox_store
from tenantq.store.placement import PlacementReader
from tenantq.topic_admin import declared_topics
from tenantq.topics import main_topic

__all__ = ["Outbox", "OutboxRef", "declared_partition_counts"]


class OutboxRef(NamedTuple):
    """The job an outbox enqueue names: ``created`` is False when the idempotency key already
    named a job (that job's id is returned, nothing new was written)."""

    job_id: uuid.UUID
    created: bool
    queue: str


def declared_partition_counts(settings: Settings) -> Callable[[str], int]:
    """Partitions of every topic of every declared queue, as ``TENANTQ_QUEUES`` says."""
    counts = {spec.name: spec.partitions for spec in declared_topics(settings)}

    def partition_count(topic: str) -> int:
        try:
            return counts[topic]
        except KeyError:
            raise ConfigurationError(f"topic {topic!r} belongs to no declared queue") from None

    return partition_count


class Outbox(ClosedOnExit):
    """Enqueue jobs atomically with the caller's own database writes.

    >>> outbox = tenantq.Outbox(app)
    >>> with psycopg.connect(url) as conn:            # one transaction
    ...     conn.execute("INSERT INTO orders ...")
    ...     ref = outbox.enqueue(conn, "send_receipt", tenant="acme", payload={...})
    >>> ref.job_id, ref.created

    ``app`` supplies the payload models and default queues of its job types (as for
    ``Producer``); ``settings`` default to ``app.settings`` or ``TENANTQ_*``. The outbox
    keeps one connection of its own to read tenant placements (cached); ``close()`` it, or
    use it as a context manager. It is safe to share between threads.
    """

    def __init__(self, app: App | None = None, *, settings: Settings | None = None) -> None:
        self.settings = settings or (app.settings if app is not None else load_settings())
        self.app = app
        self._placement_reader = (
            PlacementReader(self.settings) if self.settings.database_url is not None else None
        )
        self._placements = PlacementBook(
            self._placement_reader, self.settings.producer.placement_ttl_seconds
        )
        self._preparer = RequestPreparer(
            self.settings,
            app,
            self._placements,
            declared_partition_counts(self.settings),
            new_job_id_ints,
        )

    def enqueue(
        self,
        conn: Any,
        job_type: str,
        *,
        tenant: str,
        payload: Any,
        **options: Unpack[EnqueueOptions],
    ) -> OutboxRef:
        """Write the job and its outbox entry in ``conn``'s open transaction (the ``options``
        are ``Producer.enqueue``'s, ``EnqueueOptions``).

        Validation is ``Producer.enqueue``'s and raises the same errors (nothing written).
        With an ``idempotency_key`` that already names a job of the queue: the same job type,
        tenant and payload return that job (``created=False``); anything else raises
        ``JobConflict``. The job runs once the transaction commits and the relay has
        published it; if the transaction rolls back, it never existed.
        """
        request = EnqueueRequest(job_type=job_type, tenant=tenant, payload=payload, **options)
        return self.enqueue_request(conn, request)

    async def enqueue_async(
        self,
        conn: psycopg.AsyncConnection[Any],
        job_type: str,
        *,
        tenant: str,
        payload: Any,
        **options: Unpack[EnqueueOptions],
    ) -> OutboxRef:
        """``enqueue`` in the open transaction of a psycopg ``AsyncConnection``."""
        request = EnqueueRequest(job_type=job_type, tenant=tenant, payload=payload, **options)
        return await self.enqueue_request_async(conn, request)

    async def enqueue_request_async(
        self, conn: psycopg.AsyncConnection[Any], request: EnqueueRequest
    ) -> OutboxRef:
        """``enqueue_async`` of a prepared ``EnqueueRequest`` (which may name its ``job_id``;
        a typed job handle's ``enqueue_async(outbox, conn, ...)`` comes here)."""
        if not isinstance(conn, psycopg.AsyncConnection):
            raise ConfigurationError(
                f"enqueue_async needs a psycopg AsyncConnection, got {type(conn).__name__}"
            )
        with PublicationScope(_start_creation(request)) as creation:
            row = self._prepare_in(creation, request)
            async with conn.cursor() as cursor:
                await cursor.execute(outbox_store.OUTBOX_ENQUEUE, row.parameters())
                inserted = await cursor.fetchone()
                if inserted is not None:
                    return OutboxRef(uuid.UUID(str(inserted[0])), True, row.queue)
                await cursor.execute(outbox_store.JOB_BY_IDEMPOTENCY_KEY, row.key_parameters())
                found = await cursor.fetchone()
            return _existing(row, outbox_store.existing_job(found))

    def enqueue_request(self, conn: Any, request: EnqueueRequest) -> OutboxRef:
        """``enqueue`` of a prepared ``EnqueueRequest`` (which may name its ``job_id``; a
        typed job handle's ``enqueue(outbox, conn, ...)`` comes here)."""
        with PublicationScope(_start_creation(request)) as creation:
            row = self._prepare_in(creation, request)
            execute = _executor(conn)
            inserted = execute(outbox_store.OUTBOX_ENQUEUE, row.parameters())
            if inserted is not None:
                return OutboxRef(uuid.UUID(str(inserted[0])), True, row.queue)
            found = execute(outbox_store.JOB_BY_IDEMPOTENCY_KEY, row.key_parameters())
            return _existing(row, outbox_store.existing_job(found))

    def _prepare_in(
        self, creation: Publication | None, request: EnqueueRequest
    ) -> outbox_store.OutboxRow:
        """``prepare``; in a traced ``creation``, the envelope keeps its context (the entry
        is the Kafka record byte for byte, so the relay publishes the context unchanged)."""
        if creation is None:
            return self.prepare(request)
        row = self.prepare(dataclasses.replace(request, trace_context=creation.trace_context))
        creation.describe(
            count=1,
            topics=(row.topic,),
            partitions=(row.partition,),
            queues=(row.queue,),
            tenants=(row.tenant_id,),
            job_types=(row.job_type,),
            job_id=row.id,
        )
        return row

    def prepare(self, request: EnqueueRequest) -> outbox_store.OutboxRow:
        """Validate, encode and place ``request``: the row and entry it would write."""
        message = self._preparer.prepare(request, dt.datetime.now(dt.UTC))
        envelope = decode_envelope(message.value, max_bytes=self.settings.max_message_bytes)
        job_type = self.app.find(envelope.job_type) if self.app is not None else None
        max_attempts = resolve_max_attempts(
            envelope.max_attempts, job_type, self.settings.worker.default_max_attempts
        )
        return outbox_store.OutboxRow(
            id=message.job_id,
            deployment=self.settings.topic_prefix,
            queue=message.queue,
            main_topic=main_topic(self.settings.topic_prefix, message.queue),
            job_type=envelope.job_type,
            tenant_id=envelope.tenant_id,
            partition_key=envelope.partition_key,
            payload=envelope.payload,
            # Exactly the worker's hash (WorkItem.payload_sha256), so its claim of the
            # published record matches this row instead of calling it a conflict.
            payload_sha256=hashlib.sha256(envelope.payload).digest(),
            max_attempts=max_attempts,
            run_after=envelope.run_after,
            idempotency_key=envelope.idempotency_key,
            topic=message.topic,
            partition=message.partition,
            enqueued_at=envelope.created_at,
            key=message.key,
            value=message.value,
            headers=outbox_store.encode_headers(message.kafka_headers()),
        )

    def close(self) -> None:
        """Close the placement reader's connection."""
        if self._placement_reader is not None:
            self._placement_reader.close()


def _start_creation(request: EnqueueRequest) -> Publication | None:
    """The ``create`` span of an outbox enqueue when the process traces and the request names
    no context of its own (one it names is kept as given)."""
    if request.trace_context is not None:
        return None
    tracer = job_tracer()
    return None if tracer is None else tracer.publication("create")


def _existing(row: outbox_store.OutboxRow, job: outbox_store.ExistingJob | None) -> OutboxRef:
    """The ref of the job holding ``row``'s idempotency key, or ``JobConflict``."""
    if job is None:
        # Only reachable if the key's holder vanished between the two statements.
        raise JobConflict(
            f"idempotency key {row.idempotency_key!r} of queue {row.queue!r} is held by a job "
            "that could not be read; try again"
        )
    check_same_job(
        row.idempotency_key,
        row.queue,
        job.job_id,
        KeyedJob(job.job_type, job.tenant_id, job.payload_sha256),
        KeyedJob(row.job_type, row.tenant_id, row.payload_sha256),
        "the original is kept",
    )
    return OutboxRef(job.job_id, False, row.queue)


def _executor(conn: Any) -> Callable[[str, dict[str, Any]], Any]:
    """A function that runs one statement on ``conn`` and returns its first row or None."""
    if isinstance(conn, psycopg.Connection):

        def on_psycopg(statement: str, parameters: dict[str, Any]) -> Any:
            with conn.cursor() as cursor:
                cursor.execute(statement, parameters)
                return cursor.fetchone()

        return on_psycopg
    connection = _sqlalchemy_connection(conn)
    if connection is not None:

        def on_sqlalchemy(statement: str, parameters: dict[str, Any]) -> Any:
            # The driver's own paramstyle (%(name)s for psycopg and psycopg2), in the
            # caller's transaction.
            return connection.exec_driver_sql(statement, parameters).fetchone()

        return on_sqlalchemy
    raise ConfigurationError(
        "Outbox.enqueue needs a psycopg Connection, a SQLAlchemy Connection or a SQLAlchemy "
        f"Session in an open transaction, got {type(conn).__name__}"
    )


def _sqlalchemy_connection(conn: Any) -> Any:
    try:
        from sqlalchemy.engine import Connection
        from sqlalchemy.orm import Session
    except ImportError:  # pragma: no cover - SQLAlchemy is a dependency
        return None
    if isinstance(conn, Connection):
        return conn
    if isinstance(conn, Session):
        return conn.connection()
    return None
