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
from tenantq.job_ids import job_id_text
from tenantq.partitioner.placement import Placement, key_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.partitioner.tenant_id import validate_tenant_id
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
    DEFAULT_TAIL,
    EnvelopeWriter,
    encode_long,
    encode_tail,
    timestamp_micros,
    writer_for,
)
from tenantq.settings import QueueSettings, Settings
from tenantq.topics import lane_topic, main_topic, retry_topic, tier_for_wait

DEFAULT_QUEUE = "default"
#: Bound of each per-producer memo (identities, tenants, headers): cleared when exceeded.
MEMO_LIMIT = 100_000
#: Hot-lane jobs of one batch sent to one partition before the next (``_lane_partition``):
#: about one Kafka batch of them, far below a flood's 5,000 a second, so the lane's
#: partitions fill evenly within a second.
LANE_BATCH_JOBS = 64


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


class EncodedJob(NamedTuple):
    """A validated job, encoded and placed, ready for ``produce``.

    Only atomic values and shared tuples: the cyclic GC stops tracking such a tuple at its
    first pass, so a batch waiting to be published costs the collector nothing. For the same
    reason the job id is kept as text and integer (no ``UUID``) and the per-job header list
    is built at ``produce`` time (``kafka_headers``).
    """

    job_id: str
    job_int: int
    queue: str
    tenant_id: str
    topic: str
    partition: int
    key: bytes
    value: bytes
    #: Every header but the job id's, often one tuple shared by all jobs of a tenant.
    extra_headers: tuple[tuple[str, str], ...]
    #: It has an idempotency key: once Kafka holds it, it gets a pending row (with database
    #: access), so another producer's lookup finds the key (``tenantq.producer.unique``).
    keyed: bool = False

    def kafka_headers(self) -> list[tuple[str, str | bytes]]:
        """The headers to produce with: the job id, then ``extra_headers``."""
        return [(header_names.JOB_ID, self.job_id), *self.extra_headers]


class _Route:
    """Everything about a (job type, tenant, queue) that does not depend on the job: checked
    once per batch, then shared by every plain job of the batch with those three values."""

    __slots__ = (
        "base_headers", "hashed", "identity", "job_type", "key", "lane", "model", "partition",
        "partition_key", "partitions", "placement", "queue", "sent_to_partition", "tenant_id",
        "topic",
    )  # fmt: skip

    def __init__(
        self,
        job_type: str,
        model: type[BaseModel] | None,
        tenant_id: str,
        queue: str,
        topic: str,
        partitions: int,
        placement: Placement,
        base_headers: tuple[tuple[str, str], ...],
    ) -> None:
        self.job_type = job_type
        self.model = model
        self.tenant_id = tenant_id
        self.queue = queue
        self.topic = topic
        self.partitions = partitions
        self.placement = placement
        self.base_headers = base_headers
        # Hashed placement (the default) does not depend on the job id: place once.
        self.hashed = placement.mode == "hashed"
        #: The hot lane: one partition for a run of jobs of a batch (``_lane_partition``).
        self.lane = placement.mode == "lane"
        self.sent_to_partition = 0
        self.partition_key = tenant_id
        self.partition = -1
        self.key = b""
        self.identity = b""


class _Batch:
    """What is constant within one ``prepare_all`` call: the time and lookups of it."""

    __slots__ = ("created", "next_job_id", "now", "partition_counts", "placements", "routes")

    def __init__(self, now: dt.datetime, next_job_id: Callable[[], int]) -> None:
        self.now = now
        self.created = encode_long(timestamp_micros(now))
        self.next_job_id = next_job_id
        self.placements: dict[tuple[str, str], Placement] = {}
        self.partition_counts: dict[str, int] = {}
        self.routes: dict[tuple[object, object, object], _Route] = {}


class RequestPreparer:
    """Validates requests and turns them into ``EncodedJob`` messages.

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
        new_job_ids: Callable[[int], list[int]],
    ) -> None:
        self._settings = settings
        self._app = app
        self._placements = placements
        self._partition_count = partition_count
        self._new_job_ids = new_job_ids
        self._writer = writer_for(DEFAULT_CODEC)
        self._queues: dict[str, QueueSettings] = {}
        self._valid_tenants: set[str] = set()
        self._job_types: dict[str, tuple[str, type[BaseModel] | None]] = {}
        self._identities: dict[tuple[str, str, str, str], bytes] = {}
        self._base_headers: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}

    def prepare_all(
        self, requests: Iterable[EnqueueRequest | Mapping[str, Any]], now: dt.datetime
    ) -> list[EncodedJob]:
        """Every request prepared, or the first error (with a note naming its index)."""
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        batch = _Batch(now, iter(self._new_job_ids(len(requests))).__next__)
        prepared: list[EncodedJob] = []
        append = prepared.append
        prepare = self.prepare
        plain = self._plain_job
        # With an unknown schema only the generic path (fastavro) can encode.
        writer = self._writer
        for index, request in enumerate(requests):
            try:
                if type(request) is not EnqueueRequest:
                    request = _as_request(request)
                if (
                    writer is not None
                    and request.run_after is None
                    and request.delay is None
                    and request.max_attempts is None
                    and request.idempotency_key is None
                    and request.trace_context is None
                ):
                    append(plain(request, batch, writer))
                else:
                    append(prepare(request, batch))
            except (InvalidJobError, ConfigurationError) as error:
                error.add_note(f"(request #{index} of the batch; nothing was published)")
                raise
        return prepared

    def _plain_job(
        self, request: EnqueueRequest, batch: _Batch, writer: EnvelopeWriter
    ) -> EncodedJob:
        """``prepare`` for the common job without options: the same checks and the same bytes,
        with the per-(job type, tenant, queue) work done once per batch (``_Route``)."""
        route_key = (request.job_type, request.tenant, request.queue)
        try:
            route = batch.routes.get(route_key)
        except TypeError:  # an unhashable job type or tenant: the checks will say what is wrong
            route = None
        if route is None:
            route = self._route(request, batch)
            try:
                batch.routes[route_key] = route
            except TypeError:
                pass
        payload = encode_payload(
            route.job_type, request.payload, route.model, self._settings.max_payload_bytes
        )
        job_int = batch.next_job_id() if request.job_id is None else _explicit(request.job_id)
        if route.hashed:
            partition_key, partition = route.partition_key, route.partition
            key, identity = route.key, route.identity
        elif route.lane:
            partition_key, partition = route.partition_key, self._lane_partition(route, job_int)
            key, identity = route.key, route.identity
        else:
            partition_key, partition = route.placement.choose(
                route.tenant_id, uuid.UUID(int=job_int), route.partitions
            )
            key = partition_key.encode()
            identity = self._identity(route.queue, route.job_type, route.tenant_id, partition_key)
        text = job_id_text(job_int)
        value = writer.encode(text, identity, payload, batch.created, DEFAULT_TAIL)
        if len(value) > self._settings.max_message_bytes:
            self._refuse_size(route.job_type, len(value))
        return EncodedJob(
            text,
            job_int,
            route.queue,
            route.tenant_id,
            route.topic,
            partition,
            key,
            value,
            route.base_headers,
        )

    def _route(self, request: EnqueueRequest, batch: _Batch) -> _Route:
        """The checks of ``prepare`` that depend only on job type, tenant and queue."""
        job_type = request.job_type
        default_queue, model = self._job_type(job_type)
        tenant_id = self._tenant(request.tenant)
        queue = request.queue or default_queue
        self._queue(queue)
        placement = self._placement(batch, queue, tenant_id)
        topic = self._topic_of(queue, placement)
        route = _Route(
            job_type,
            model,
            tenant_id,
            queue,
            topic,
            self._main_partitions(batch, topic),
            placement,
            self._headers(job_type, tenant_id),
        )
        if route.hashed or route.lane:
            # Placement.choose ignores the job id when hashed, and a lane job's key is its
            # tenant whatever its partition: any id will do.
            route.partition_key, route.partition = route.placement.choose(
                tenant_id, uuid.UUID(int=0), route.partitions
            )
            route.key = route.partition_key.encode()
            route.identity = self._identity(queue, job_type, tenant_id, route.partition_key)
            route.partition = -1 if route.lane else route.partition
        return route

    @staticmethod
    def _lane_partition(route: _Route, job_int: int) -> int:
        """A hot-lane job's partition within one batch: the first job's draw (as
        ``Placement.choose``), then the same partition for ``LANE_BATCH_JOBS`` jobs, then the
        next one. Drawn per job, a flood's batch of 50 became 12 Kafka batches of about 4
        messages, one per lane partition, and the broker's cost is per batch; a large batch
        still reaches every partition, so every worker shares the lane's backlog."""
        if route.partition < 0 or route.sent_to_partition >= LANE_BATCH_JOBS:
            if route.partition < 0:
                route.partition = route.placement.choose(
                    route.tenant_id, uuid.UUID(int=job_int), route.partitions
                )[1]
            else:
                route.partition = (route.partition + 1) % route.partitions
            route.sent_to_partition = 0
        route.sent_to_partition += 1
        return route.partition

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
    ) -> EncodedJob:
        """One request, validated, encoded and placed."""
        if not isinstance(batch, _Batch):
            batch = _Batch(batch, lambda: self._new_job_ids(1)[0])
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
        job_int = batch.next_job_id() if request.job_id is None else _explicit(request.job_id)
        job_id = uuid.UUID(int=job_int)

        prefix = self._settings.topic_prefix
        placement = self._placement(batch, queue, tenant_id)
        main = self._topic_of(queue, placement)
        partition_key, partition = placement.choose(
            tenant_id, job_id, self._main_partitions(batch, main)
        )
        job_id_text = str(job_id)
        headers: tuple[tuple[str, str], ...] = self._headers(job_type, tenant_id)
        topic = main
        if due is not None:
            wait = (due - now).total_seconds()
            tier = tier_for_wait(wait, queue_settings.retry_delays_seconds)
            topic = retry_topic(prefix, queue, tier)
            # Tiers may have fewer partitions than the main topic: hash the chosen key there.
            partition = key_partition(partition_key, self._main_partitions(batch, topic))
            headers += (
                (header_names.DUE_AT_MS, str(int(due.timestamp() * 1000))),
                (header_names.DELAY_REASON, "scheduled"),
            )

        value = self._encode(
            job_id_text, queue, job_type, tenant_id, partition_key, payload, batch,
            due, max_attempts, idempotency_key, trace_context,
        )  # fmt: skip
        if len(value) > self._settings.max_message_bytes:
            self._refuse_size(job_type, len(value))
        return EncodedJob(
            job_id_text,
            job_int,
            queue,
            tenant_id,
            topic,
            partition,
            partition_key.encode(),
            value,
            headers,
            idempotency_key is not None,
        )

    def _topic_of(self, queue: str, placement: Placement) -> str:
        """Where a job that runs now goes: the queue's main topic, or its hot lane."""
        if placement.in_lane:
            return lane_topic(self._settings.topic_prefix, queue)
        return main_topic(self._settings.topic_prefix, queue)

    def _placement(self, batch: _Batch, queue: str, tenant_id: str) -> Placement:
        placement = batch.placements.get((queue, tenant_id))
        if placement is None:
            placement = self._placements.placement(queue, tenant_id)
            batch.placements[(queue, tenant_id)] = placement
        return placement

    def _headers(self, job_type: str, tenant_id: str) -> tuple[tuple[str, str], ...]:
        """The headers every job of (job type, tenant) carries besides its id."""
        base_headers = self._base_headers.get((job_type, tenant_id))
        if base_headers is None:
            if len(self._base_headers) >= MEMO_LIMIT:
                self._base_headers.clear()
            base_headers = self._base_headers[(job_type, tenant_id)] = (
                (header_names.JOB_TYPE, job_type),
                (header_names.TENANT, tenant_id),
                (header_names.SCHEMA_FINGERPRINT, SCHEMA_FINGERPRINT_HEX),
            )
        return base_headers

    def _identity(self, queue: str, job_type: str, tenant_id: str, partition_key: str) -> bytes:
        """The encoded identity fields of the envelope (see ``EnvelopeWriter``), memoised."""
        identity_key = (queue, job_type, tenant_id, partition_key)
        identity = self._identities.get(identity_key)
        if identity is None:
            if len(self._identities) >= MEMO_LIMIT:
                self._identities.clear()
            identity = self._identities[identity_key] = EnvelopeWriter.identity(*identity_key)
        return identity

    def _refuse_size(self, job_type: str, size: int) -> None:
        raise InvalidJobError(
            f"job of {job_type!r} is {size} bytes as an envelope, "
            f"the limit (max_message_bytes) is {self._settings.max_message_bytes}"
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
        identity = self._identity(queue, job_type, tenant_id, partition_key)
        tail = encode_tail(due, max_attempts, idempotency_key, trace_context)
        return writer.encode(job_id_text, identity, payload, batch.created, tail)


def _explicit(job_id: object) -> int:
    checked = check_job_id(job_id)
    assert checked is not None
    return checked.int


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
