"""From an enqueue request to the exact bytes, topic and partition that will be published."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, overload

from pydantic import BaseModel

from tenantq import headers as header_names
from tenantq.app import App
from tenantq.enqueue_request import EnqueueRequest as EnqueueRequest
from tenantq.errors import ConfigurationError, InvalidJobError
from tenantq.job_ids import job_id_text
from tenantq.partitioner.placement import Placement, key_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer import validation
from tenantq.producer.rows import Rows
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
    SMALL_LENGTH_LIMIT,
    SMALL_LENGTHS,
    EnvelopeWriter,
    encode_length,
    encode_long,
    encode_tail,
    timestamp_micros,
    writer_for,
)
from tenantq.settings import QueueSettings, Settings
from tenantq.tenant_ids import validate_tenant_id
from tenantq.topics import lane_topic, main_topic, retry_topic, tier_for_wait

DEFAULT_QUEUE = "default"
#: Bound of each per-producer memo (identities, tenants, headers): cleared when exceeded.
MEMO_LIMIT = 100_000
#: Hot-lane jobs of one batch sent to one partition before the next (``_lane_partition``):
#: about one Kafka batch of them, far below a flood's 5,000 a second, so the lane's
#: partitions fill evenly within a second.
LANE_BATCH_JOBS = 64
#: The Avro length prefix of a job id's 36 characters: a job id's envelope starts with the
#: schema header, this byte and the id.
_JOB_ID_LENGTH = encode_length(36)


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


@dataclass(eq=False, repr=False, slots=True)
class Destination:
    """Where a job goes and what it carries besides its id and envelope: the fields of an
    ``EncodedJob`` that the jobs of a batch share (one per route and partition).

    A class with slots, not a named tuple: the producer's loops read four of its fields per
    job, and a slot is read in a third of the time of a named tuple's field. Equal only to
    itself and hashed by identity (``PreparedJobs.tenant_counts`` counts the shared ones)."""

    queue: str
    tenant_id: str
    topic: str
    partition: int
    key: bytes
    #: Every header but the job id's (``EncodedJob.extra_headers``).
    extra_headers: tuple[tuple[str, str], ...]
    keyed: bool = False

    def __repr__(self) -> str:
        return (
            f"Destination({self.queue!r}, {self.tenant_id!r}, {self.topic!r}, "
            f"{self.partition!r}, {self.key!r}, {self.extra_headers!r}, {self.keyed!r})"
        )


@dataclass(eq=False, repr=False, slots=True)
class PreparedJobs(Rows[EncodedJob]):
    """The jobs of one ``prepare_all`` call: a read-only sequence of ``EncodedJob`` kept as
    columns, each ``EncodedJob`` made when it is read.

    A tuple per job (``EncodedJob``) is one more object for the cyclic GC to count and, while
    the job waits for its delivery report, to scan: with the future of each job as well,
    that nearly doubles the collections a large ``enqueue_many`` sets off, and their time
    (``loadtest/producer_bench.py --profile`` times them). The columns hold only atomic
    values and the shared ``Destination`` of each job. The producer's hot loops read the
    columns directly.
    """

    #: The job ids as integers, and as the ASCII of their text (the ``tenantq-job-id``
    #: header, which Kafka stores as bytes either way).
    job_ints: list[int]
    ids: list[bytes]
    #: The envelopes.
    values: list[bytes]
    destinations: list[Destination]
    #: At least one job has an idempotency key.
    keyed: bool
    #: How many jobs had options (``prepare``'s generic path). The others go to the
    #: topic of their queue (or its hot lane) and have no key: they run now.
    generic: int = 0

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> EncodedJob: ...

    @overload
    def __getitem__(self, index: slice) -> PreparedJobs: ...

    def __getitem__(self, index: int | slice) -> EncodedJob | PreparedJobs:
        if isinstance(index, slice):
            return self.subset(range(len(self))[index])
        destination = self.destinations[index]
        return EncodedJob(
            self.ids[index].decode(),
            self.job_ints[index],
            destination.queue,
            destination.tenant_id,
            destination.topic,
            destination.partition,
            destination.key,
            self.values[index],
            destination.extra_headers,
            destination.keyed,
        )

    def __iter__(self) -> Iterator[EncodedJob]:
        for index in range(len(self.values)):
            yield self[index]

    def subset(self, positions: Iterable[int]) -> PreparedJobs:
        """The jobs at ``positions``, in that order."""
        chosen = list(positions)
        return PreparedJobs(
            [self.job_ints[index] for index in chosen],
            [self.ids[index] for index in chosen],
            [self.values[index] for index in chosen],
            [self.destinations[index] for index in chosen],
            any(self.destinations[index].keyed for index in chosen),
            # An upper bound: only whether it is 0 matters.
            self.generic,
        )

    def tenant_counts(self) -> dict[str, int]:
        """Jobs per tenant (for admission and the flood meter)."""
        counts: dict[str, int] = {}
        # The jobs share a few ``Destination`` objects, hashed by identity: counted in C, then
        # added up by tenant, instead of a tenant read per job.
        for destination, jobs in Counter(self.destinations).items():
            counts[destination.tenant_id] = counts.get(destination.tenant_id, 0) + jobs
        return counts

    def queues(self) -> set[str]:
        """The queues of the jobs (for the latency guard)."""
        return {destination.queue for destination in self.destinations}


def _destination_of(job: EncodedJob) -> Destination:
    return Destination(
        job.queue, job.tenant_id, job.topic, job.partition, job.key, job.extra_headers, job.keyed
    )


@dataclass(eq=False, repr=False, slots=True)
class _Route:
    """Everything about a (job type, tenant, queue) that does not depend on the job: checked
    once per batch, then shared by every plain job of the batch with those three values."""

    job_type: str
    model: type[BaseModel] | None
    tenant_id: str
    queue: str
    topic: str
    partitions: int
    placement: Placement
    base_headers: tuple[tuple[str, str], ...]
    #: The queue the requests named (None: the job type's).
    requested_queue: str | None
    # Hashed placement (the default) does not depend on the job id: place once.
    hashed: bool = field(init=False)
    #: The hot lane: one partition for a run of jobs of a batch (``_lane_partition``).
    lane: bool = field(init=False)
    sent_to_partition: int = field(init=False, default=0)
    partition_key: str = field(init=False)
    partition: int = field(init=False, default=-1)
    key: bytes = field(init=False, default=b"")
    identity: bytes = field(init=False, default=b"")
    #: Of a hashed route: where all its jobs go.
    destination: Destination | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.hashed = self.placement.mode == "hashed"
        self.lane = self.placement.mode == "lane"
        self.partition_key = self.tenant_id


class _Batch:
    """What is constant within one ``prepare_all`` call: the time and lookups of it, and the
    trace context of its publication (empty when not traced)."""

    __slots__ = (
        "created", "now", "partition_counts", "placed", "placements", "routes", "trace_context",
    )  # fmt: skip

    def __init__(self, now: dt.datetime, trace_context: dict[str, str] | None = None) -> None:
        self.now = now
        self.created = encode_long(timestamp_micros(now))
        #: Written into every envelope of the batch whose request names no context.
        self.trace_context = trace_context or {}
        self.placements: dict[tuple[str, str], Placement] = {}
        self.partition_counts: dict[str, int] = {}
        self.routes: dict[tuple[object, object, object], _Route] = {}
        #: (route, partition key, partition) -> the destination and identity fields of the
        #: route's jobs placed there (routes that are not hashed).
        self.placed: dict[tuple[_Route, str, int], tuple[Destination, bytes]] = {}


class RequestPreparer:
    """Validates requests and turns them into ``EncodedJob`` messages (``prepare``), or a
    batch of them into ``PreparedJobs`` (``prepare_all``).

    Hot path: what repeats across jobs (tenant checks, the encoded identity fields, headers,
    placements, partition counts) is memoised, and the envelope is written by the specialised
    ``EnvelopeWriter`` (or its inlined form in ``prepare_all``) when it knows the schema
    (fastavro otherwise).
    """

    def __init__(
        self,
        settings: Settings,
        app: App | None,
        placements: PlacementBook,
        partition_count: Callable[[str], int],
        new_job_ids: Callable[[int], list[int]],
        new_job_id_block: Callable[[int], tuple[list[int], Sequence[bytes]]] | None = None,
    ) -> None:
        """``new_job_ids(n)``: n fresh job ids as integers; ``new_job_id_block(n)``: the same
        with their text (``tenantq.job_ids.new_job_id_block``), made from ``new_job_ids``
        when not given."""
        self._settings = settings
        self._app = app
        self._placements = placements
        self._partition_count = partition_count
        self._new_job_ids = new_job_ids
        self._new_job_id_block_fn = new_job_id_block
        self._writer = writer_for(DEFAULT_CODEC)
        self._queues: dict[str, QueueSettings] = {}
        self._valid_tenants: set[str] = set()
        self._job_types: dict[str, tuple[str, type[BaseModel] | None]] = {}
        self._identities: dict[tuple[str, str, str, str], bytes] = {}
        self._base_headers: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}

    def prepare_all(
        self,
        requests: Iterable[EnqueueRequest | Mapping[str, Any]],
        now: dt.datetime,
        trace_context: dict[str, str] | None = None,
    ) -> PreparedJobs:
        """Every request prepared, or the first error (with a note naming its index).
        ``trace_context``: the publication's, for every request that names none of its own
        (checked by the caller: ``tenantq.observability.tracing`` fits it)."""
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        count = len(requests)
        job_ints, id_texts = self._new_job_id_block(count)
        batch = _Batch(now, trace_context)
        # The ids' text as the column, replaced where a job has an id of its own.
        ids = list(id_texts)
        values: list[bytes] = []
        destinations: list[Destination] = []
        keyed = False
        generic = 0
        # The hot loop of every enqueue, so the producer's throughput: ``prepare`` for the
        # common job without options, written out. The same checks and the same bytes (a
        # unit test compares the two over many varied batches), with what depends only on
        # job type, tenant and queue done once per batch (``_Route``), the ids and their
        # text made for the whole batch (``new_job_id_block``), and columns instead of a
        # tuple per job (``PreparedJobs``), so no object per job is left for the cyclic GC.
        add_value, add_destination = values.append, destinations.append
        tenant_routes: dict[object, _Route] = {}
        routes_by_tenant = tenant_routes.get
        writer = self._writer  # None: a schema this module does not know, only fastavro
        head = b"" if writer is None else writer.header + _JOB_ID_LENGTH
        # A traced batch: one context for all its jobs, so still one tail for them all.
        tail = batch.created + (
            encode_tail(None, None, None, trace_context) if trace_context else DEFAULT_TAIL
        )
        lengths = SMALL_LENGTHS
        json_chunks = validation.C_ENCODER
        join_text = "".join
        join_bytes = b"".join
        max_payload = self._settings.max_payload_bytes
        max_message = self._settings.max_message_bytes
        index = 0
        try:
            for index, request in enumerate(requests):
                if type(request) is not EnqueueRequest:
                    request = _as_request(request)
                if (
                    request.run_after is not None
                    or request.delay is not None
                    or request.max_attempts is not None
                    or request.idempotency_key is not None
                    or request.trace_context is not None
                    or writer is None
                ):
                    job = self._prepare_one(request, batch, job_ints, index)
                    ids[index] = job.job_id.encode()
                    add_value(job.value)
                    add_destination(_destination_of(job))
                    keyed = keyed or job.keyed
                    generic += 1
                    continue
                # The route of the job's tenant, if it is for the same job type and queue
                # (the same objects, as a batch's requests usually hold): a lookup by tenant
                # alone costs about half of one keyed by all three.
                try:
                    route = routes_by_tenant(request.tenant)
                except TypeError:  # an unhashable tenant: the checks will say what is wrong
                    route = None
                if (
                    route is None
                    or route.job_type is not request.job_type
                    or route.requested_queue is not request.queue
                ):
                    route = self._batch_route(request, batch, tenant_routes)
                payload = request.payload
                data = None
                if type(payload) is dict and route.model is None and json_chunks is not None:
                    try:
                        data = join_text(json_chunks(payload, 0)).encode()
                    except (TypeError, ValueError, RecursionError):
                        pass  # encode_payload raises the error as it words it
                if data is None or len(data) > max_payload:
                    data = encode_payload(route.job_type, payload, route.model, max_payload)
                if request.job_id is None:
                    job_id = id_texts[index]
                else:
                    job_int = job_ints[index] = _explicit(request.job_id)
                    job_id = ids[index] = job_id_text(job_int).encode()
                destination = route.destination
                if destination is None:
                    destination, identity = self._placed(route, job_ints[index], batch)
                else:
                    identity = route.identity
                size = len(data)
                value = join_bytes(
                    (
                        head,
                        job_id,
                        identity,
                        lengths[size] if size < SMALL_LENGTH_LIMIT else encode_length(size),
                        data,
                        tail,
                    )
                )
                if len(value) > max_message:
                    self._refuse_size(route.job_type, len(value))
                add_value(value)
                add_destination(destination)
        except (InvalidJobError, ConfigurationError) as error:
            error.add_note(f"(request #{index} of the batch; nothing was published)")
            raise
        return PreparedJobs(job_ints, ids, values, destinations, keyed, generic)

    def _batch_route(
        self, request: EnqueueRequest, batch: _Batch, tenant_routes: dict[object, _Route]
    ) -> _Route:
        """The route of (job type, tenant, queue) in ``batch``, made on first use."""
        route_key = (request.job_type, request.tenant, request.queue)
        try:
            route = batch.routes.get(route_key)
        except TypeError:  # an unhashable job type or tenant: the checks will say
            route = None
        if route is None:
            route = self._route(request, batch)
            try:
                batch.routes[route_key] = route
            except TypeError:
                pass
        tenant_routes[request.tenant] = route
        return route

    def _new_job_id_block(self, count: int) -> tuple[list[int], Sequence[bytes]]:
        if self._new_job_id_block_fn is not None:
            return self._new_job_id_block_fn(count)
        ints = self._new_job_ids(count)
        return ints, [job_id_text(value).encode() for value in ints]

    def _prepare_one(
        self, request: EnqueueRequest, batch: _Batch, job_ints: list[int], index: int
    ) -> EncodedJob:
        """``prepare`` within ``prepare_all``: the job takes the batch's id at ``index``."""
        job = self.prepare(request, batch, job_ints[index])
        job_ints[index] = job.job_int
        return job

    def _placed(self, route: _Route, job_int: int, batch: _Batch) -> tuple[Destination, bytes]:
        """The destination and identity fields of a job of a route that is not hashed."""
        if route.lane:
            partition_key, partition = route.partition_key, self._lane_partition(route, job_int)
        else:
            partition_key, partition = route.placement.choose(
                route.tenant_id, uuid.UUID(int=job_int), route.partitions
            )
        memo_key = (route, partition_key, partition)
        placed = batch.placed.get(memo_key)
        if placed is None:
            placed = batch.placed[memo_key] = (
                Destination(
                    route.queue,
                    route.tenant_id,
                    route.topic,
                    partition,
                    partition_key.encode(),
                    route.base_headers,
                ),
                self._identity(route.queue, route.job_type, route.tenant_id, partition_key),
            )
        return placed

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
            request.queue,
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
        if route.hashed:
            route.destination = Destination(
                queue, tenant_id, topic, route.partition, route.key, route.base_headers
            )
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
        self,
        request: EnqueueRequest | Mapping[str, Any],
        batch: _Batch | dt.datetime,
        fresh_id: int | None = None,
    ) -> EncodedJob:
        """One request, validated, encoded and placed; ``fresh_id``: the job id (an integer)
        to give it if the request names none (default: a new one)."""
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
        trace_context = (
            batch.trace_context
            if request.trace_context is None
            else check_trace_context(request.trace_context)
        )
        if request.job_id is not None:
            job_int = _explicit(request.job_id)
        elif fresh_id is not None:
            job_int = fresh_id
        else:
            job_int = self._new_job_ids(1)[0]
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
