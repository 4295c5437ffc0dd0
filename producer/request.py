"""From an enqueue request to the exact bytes, topic and partition that will be published."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from tenantq import headers as header_names
from tenantq.app import App
from tenantq.errors import ConfigurationError, InvalidJobError
from tenantq.partitioner.placement import key_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.partitioner.tenant_id import validate_tenant_id
from tenantq.producer.scheduling import tier_for_wait
from tenantq.producer.validation import (
    check_idempotency_key,
    check_job_id,
    check_job_type_name,
    check_keyword_names,
    check_max_attempts,
    check_trace_context,
    encode_payload,
    resolve_due_time,
)
from tenantq.schemas.envelope import DEFAULT_CODEC, SCHEMA_FINGERPRINT_HEX
from tenantq.settings import QueueSettings, Settings
from tenantq.topics import main_topic, retry_topic

DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One job to enqueue; the arguments of ``Producer.enqueue`` as a value."""

    job_type: str
    tenant: str
    payload: Any
    queue: str | None = None
    job_id: uuid.UUID | str | None = None
    run_after: dt.datetime | None = None
    delay: float | dt.timedelta | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    trace_context: Mapping[str, str] | None = None


REQUEST_FIELDS = frozenset(field.name for field in fields(EnqueueRequest))


@dataclass(slots=True)
class Outgoing:
    """A validated job, encoded and placed, ready for ``produce``."""

    job_id: uuid.UUID
    queue: str
    tenant_id: str
    topic: str
    partition: int
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes]]


class RequestPreparer:
    """Validates requests and turns them into ``Outgoing`` messages."""

    def __init__(
        self,
        settings: Settings,
        app: App | None,
        placements: PlacementBook,
        partition_count: Callable[[str], int],
        new_job_id: Callable[[], uuid.UUID],
    ) -> None:
        self._settings = settings
        self._app = app
        self._placements = placements
        self._partition_count = partition_count
        self._new_job_id = new_job_id
        self._encode_record = DEFAULT_CODEC.encode_record
        self._queues: dict[str, QueueSettings] = {}

    def prepare_all(
        self, requests: Iterable[EnqueueRequest | Mapping[str, Any]], now: dt.datetime
    ) -> list[Outgoing]:
        """Every request prepared, or the first error (with a note naming its index)."""
        prepared = []
        for index, request in enumerate(requests):
            try:
                prepared.append(self.prepare(request, now))
            except (InvalidJobError, ConfigurationError) as error:
                error.add_note(f"(request #{index} of the batch; nothing was published)")
                raise
        return prepared

    def _queue(self, name: str) -> QueueSettings:
        queue = self._queues.get(name)
        if queue is None:
            try:
                queue = self._settings.queue(name)
            except ConfigurationError as error:
                raise InvalidJobError(str(error)) from None
            self._queues[name] = queue
        return queue

    def prepare(self, request: EnqueueRequest | Mapping[str, Any], now: dt.datetime) -> Outgoing:
        if not isinstance(request, EnqueueRequest):
            if not isinstance(request, Mapping):
                raise InvalidJobError(f"an enqueue request must be a mapping, got {request!r}")
            check_keyword_names(request, REQUEST_FIELDS)
            try:
                request = EnqueueRequest(**request)
            except TypeError as error:
                raise InvalidJobError(f"incomplete enqueue request: {error}") from None
        job_type = check_job_type_name(request.job_type)
        tenant_id = validate_tenant_id(request.tenant)
        known = self._app.find(job_type) if self._app is not None else None
        queue = request.queue or (known.queue if known is not None else DEFAULT_QUEUE)
        queue_settings = self._queue(queue)
        payload = encode_payload(
            job_type,
            request.payload,
            known.model if known is not None else None,
            self._settings.max_payload_bytes,
        )
        due = resolve_due_time(request.run_after, request.delay, now)
        max_attempts = check_max_attempts(request.max_attempts)
        idempotency_key = check_idempotency_key(request.idempotency_key)
        trace_context = check_trace_context(request.trace_context)
        job_id = check_job_id(request.job_id) or self._new_job_id()

        prefix = self._settings.topic_prefix
        main = main_topic(prefix, queue)
        placement = self._placements.placement(queue, tenant_id)
        partition_key, partition = placement.choose(tenant_id, job_id, self._partition_count(main))
        job_id_text = str(job_id)
        headers: list[tuple[str, str | bytes]] = [
            (header_names.JOB_ID, job_id_text),
            (header_names.JOB_TYPE, job_type),
            (header_names.TENANT, tenant_id),
            (header_names.SCHEMA_FINGERPRINT, SCHEMA_FINGERPRINT_HEX),
        ]
        topic = main
        if due is not None:
            wait = (due - now).total_seconds()
            topic = retry_topic(
                prefix, queue, tier_for_wait(wait, queue_settings.retry_delays_seconds)
            )
            # Tiers may have fewer partitions than the main topic: hash the chosen key there.
            partition = key_partition(partition_key, self._partition_count(topic))
            headers.append((header_names.DUE_AT_MS, str(int(due.timestamp() * 1000))))
            headers.append((header_names.DELAY_REASON, "scheduled"))

        value = self._encode_record(
            {
                "job_id": job_id_text,
                "queue": queue,
                "job_type": job_type,
                "tenant_id": tenant_id,
                "partition_key": partition_key,
                "payload": payload,
                "created_at": now,
                "run_after": due,
                "max_attempts": max_attempts,
                "idempotency_key": idempotency_key,
                "trace_context": trace_context,
                "replay_count": 0,
                "attributes": {},
            }
        )
        if len(value) > self._settings.max_message_bytes:
            raise InvalidJobError(
                f"job of {job_type!r} is {len(value)} bytes as an envelope, "
                f"the limit (max_message_bytes) is {self._settings.max_message_bytes}"
            )
        return Outgoing(
            job_id=job_id,
            queue=queue,
            tenant_id=tenant_id,
            topic=topic,
            partition=partition,
            key=partition_key.encode(),
            value=value,
            headers=headers,
        )
