"""From an enqueue request to the exact bytes, topic and partition that will be published."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from pydantic import BaseModel
from tenantq import headers as header_names
from tenantq.app import App
from tenantq.errors import ConfigurationError, InvalidJobError
from tenantq.partitioner.placement import Placement, key_partition
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
from tenantq.schemas.envelope_writer import (
    encode_long,
    encode_tail,
    timestamp_micros,
    writer_for,
)
from tenantq.settings import QueueSettings, Settings
from tenantq.topics import main_topic, retry_topic

DEFAULT_QUEUE = "default"
#: Bound of each per-producer memo (identities, tenants, headers): cleared when exceeded.
MEMO_LIMIT = 100_000


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


class Outgoing(NamedTuple):
    """A validated job, encoded and placed, ready for ``produce``."""

    job_id: uuid.UUID
    queue: str
    tenant_id: str
    topic: str
    partition: int
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes]]


class _Batch:
    """What is constant within one ``prepare_all`` call: the time and lookups of it."""

    __slots__ = ("created", "now", "partition_counts", "placements")

    def __init__(self, now: dt.datetime) -> None:
        self.now = now
        self.created = encode_long(timestamp_micros(now))
        self.placements: dict[tuple[str, str], Placement] = {}
        self.partition_counts: dict[str, int] = {}


class RequestPreparer:
    """Validates requests and turns them into ``Outgoing`` messages.

    Hot path: what repeats across jobs (tenant checks, the encoded identity fields, headers,
    placements, partition counts) is memoised, and the envelope is written by the specialised
    ``EnvelopeWriter`` when it knows the schema (fastavro otherwise).
    """

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
        self._writer = writer_for(DEFAULT_CODEC)
        self._queues: dict[str, QueueSettings] = {}
        self._valid_tenants: set[str] = set()
        self._job_types: dict[str, tuple[str, type[BaseModel] | None]] = {}
        self._identities: dict[tuple[str, str, str, str], bytes] = {}
        self._base_headers: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}

    def prepare_all(
        self, requests: Iterable[EnqueueRequest | Mapping[str, Any]], now: dt.datetime
    ) -> list[Outgoing]:
        """Every request prepared, or the first error (with a note naming its index)."""
        batch = _Batch(now)
        prepared: list[Outgoing] = []
        append = prepared.append
        prepare = self.prepare
        for index, request in enumerate(requests):
            try:
                append(prepare(request, batch))
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

    def _job_type(self, name: object) -> tuple[str, type[BaseModel] | None]:
        """(default queue, payload model) of a job type name, checking the name once."""
        known = self._job_types.get(name) if type(name) is str else None
        if known is None:
            checked = check_job_type_name(name)
            job_type = self._app.find(checked) if self._app is not None else None
            if job_type is None:
                known = (DEFAULT_QUEUE, None)
            else:
                known = (job_type.queue, job_type.model)
            self._job_types[checked] = known
        return known

    def _tenant(self, tenant: object) -> str:
        if type(tenant) is str and tenant in self._valid_tenants:
            return tenant
        checked = validate_tenant_id(tenant)
        if len(self._valid_tenants) >= MEMO_LIMIT:
            self._valid_tenants.clear()
        self._valid_tenants.add(checked)
        return checked

    def _main_partitions(self, batch: _Batch, topic: str) -> int:
        count = batch.partition_counts.get(topic)
        if count is None:
            count = batch.partition_counts[topic] = self._partition_count(topic)
        return count

    def prepare(
        self, request: EnqueueRequest | Mapping[str, Any], batch: _Batch | dt.datetime
    ) -> Outgoing:
        """One request, validated, encoded and placed."""
        if not isinstance(batch, _Batch):
            batch = _Batch(batch)
        if type(request) is not EnqueueRequest:
            request = _as_request(request)
        job_type = request.job_type
        default_queue, model = self._job_type(job_type)
        tenant_id = self._tenant(request.tenant)
        queue = request.queue or default_queue
        queue_settings = self._queue(queue)
        payload = encode_payload(job_type, request.payload, model, self._settings.max_payload_bytes)
        now = batch.now
        due = (
            None
            if request.run_after is None and request.delay is None
            else resolve_due_time(request.run_after, request.delay, now)
        )
        max_attempts = check_max_attempts(request.max_attempts)
        idempotency_key = check_idempotency_key(request.idempotency_key)
        trace_context = check_trace_context(request.trace_context)
        job_id = self._new_job_id() if request.job_id is None else check_job_id(request.job_id)
        assert job_id is not None

        prefix = self._settings.topic_prefix
        main = main_topic(prefix, queue)
        placement = batch.placements.get((queue, tenant_id))
        if placement is None:
            placement = self._placements.placement(queue, tenant_id)
            batch.placements[(queue, tenant_id)] = placement
        partition_key, partition = placement.choose(
            tenant_id, job_id, self._main_partitions(batch, main)
        )
        job_id_text = str(job_id)
        base_headers = self._base_headers.get((job_type, tenant_id))
        if base_headers is None:
            if len(self._base_headers) >= MEMO_LIMIT:
                self._base_headers.clear()
            base_headers = self._base_headers[(job_type, tenant_id)] = (
                (header_names.JOB_TYPE, job_type),
                (header_names.TENANT, tenant_id),
                (header_names.SCHEMA_FINGERPRINT, SCHEMA_FINGERPRINT_HEX),
            )
        headers: list[tuple[str, str | bytes]] = [(header_names.JOB_ID, job_id_text), *base_headers]
        topic = main
        if due is not None:
            wait = (due - now).total_seconds()
            tier = tier_for_wait(wait, queue_settings.retry_delays_seconds)
            topic = retry_topic(prefix, queue, tier)
            # Tiers may have fewer partitions than the main topic: hash the chosen key there.
            partition = key_partition(partition_key, self._main_partitions(batch, topic))
            headers.append((header_names.DUE_AT_MS, str(int(due.timestamp() * 1000))))
            headers.append((header_names.DELAY_REASON, "scheduled"))

        value = self._encode(
            job_id_text, queue, job_type, tenant_id, partition_key, payload, batch,
            due, max_attempts, idempotency_key, trace_context,
        )  # fmt: skip
        if len(value) > self._settings.max_message_bytes:
            raise InvalidJobError(
                f"job of {job_type!r} is {len(value)} bytes as an envelope, "
                f"the limit (max_message_bytes) is {self._settings.max_message_bytes}"
            )
        return Outgoing(
            job_id, queue, tenant_id, topic, partition, partition_key.encode(), value, headers
        )

    def _encode(
        self,
        job_id_text: str,
        queue: str,
        job_type: str,
        tenant_id: str,
        partition_key: str,
        payload: bytes,
        batch: _Batch,
        due: dt.datetime | None,
        max_attempts: int | None,
        idempotency_key: str | None,
        trace_context: dict[str, str],
    ) -> bytes:
        writer = self._writer
        if writer is None:
            return DEFAULT_CODEC.encode_record(
                {
                    "job_id": job_id_text,
                    "queue": queue,
                    "job_type": job_type,
                    "tenant_id": tenant_id,
                    "partition_key": partition_key,
                    "payload": payload,
                    "created_at": batch.now,
                    "run_after": due,
                    "max_attempts": max_attempts,
                    "idempotency_key": idempotency_key,
                    "trace_context": trace_context,
                    "replay_count": 0,
                    "attributes": {},
                }
            )
        identity_key = (queue, job_type, tenant_id, partition_key)
        identity = self._identities.get(identity_key)
        if identity is None:
            if len(self._identities) >= MEMO_LIMIT:
                self._identities.clear()
            identity = self._identities[identity_key] = writer.identity(*identity_key)
        tail = encode_tail(due, max_attempts, idempotency_key, trace_context)
        return writer.encode(job_id_text, identity, payload, batch.created, tail)


def _as_request(request: object) -> EnqueueRequest:
    if isinstance(request, EnqueueRequest):
        return request
    if not isinstance(request, Mapping):
        raise InvalidJobError(f"an enqueue request must be a mapping, got {request!r}")
    check_keyword_names(request, REQUEST_FIELDS)
    try:
        return EnqueueRequest(**request)
    except TypeError as error:
        raise InvalidJobError(f"incomplete enqueue request: {error}") from None
