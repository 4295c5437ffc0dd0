"""The producer SDK: validate, admit, place and publish jobs; futures resolve on acknowledgement.

Every check runs before a byte reaches Kafka; a batch is validated whole before any of it is
published. The producer chooses the partition itself (``tenantq.partitioner``) so that placement
overrides apply and every language agrees on the default. ``DeliveryReports`` serves the
delivery reports; ``close()`` flushes and fails (never drops) the futures of jobs it could not
deliver.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from operator import length_hint
from types import TracebackType
from typing import Any, Unpack, cast

import confluent_kafka

from tenantq import headers as header_names
from tenantq.app import App
from tenantq.enqueue_request import EnqueueOptions
from tenantq.errors import ConfigurationError, EnqueueFailed, QueueFull
from tenantq.job_ids import new_job_id_block, new_job_id_ints
from tenantq.kafka_access import ClientReport, is_refusal, read_metadata, refusal_line
from tenantq.observability.tracing import Publication
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.admission import TenantAdmission
from tenantq.producer.batch import BatchFuture, JobRefs
from tenantq.producer.channel import Channel
from tenantq.producer.config import producer_config
from tenantq.producer.delivery import JobRef, Resender
from tenantq.producer.delivery_reports import DeliveryReports
from tenantq.producer.flood_meter import FloodChange, FloodMeter
from tenantq.producer.job_futures import JobFutures
from tenantq.producer.latency_guard import CommittedOffsetAgeProbe, LatencyGuard
from tenantq.producer.pending_rows import PendingRecorder
from tenantq.producer.publication_span import describe_publication, publishing_call
from tenantq.producer.request import (
    EncodedJob,
    EnqueueRequest,
    PreparedJobs,
    RequestPreparer,
)
from tenantq.producer.unique import UniqueJobs
from tenantq.settings import Settings, load_settings
from tenantq.store.placement import PlacementReader, PlacementWatcher

Callback = Callable[[Any, Any], None]
#: ``produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)``.
Produce = Callable[[str, bytes, bytes, int, Callback, None, int, list[Any]], None]

__all__ = ["BatchFuture", "EnqueueRequest", "JobFutures", "JobRef", "JobRefs", "Producer"]

logger = logging.getLogger("tenantq.producer")

#: Partition counts are re-read this often, so added partitions are used without a restart.
PARTITION_COUNT_TTL_SECONDS = 60.0
#: How long the first enqueue to a topic waits for its metadata (a refusal ends it sooner).
METADATA_TIMEOUT_SECONDS = 10.0
#: A tenant that begins to flood: how long its new jobs wait for its earlier ones to be
#: acknowledged by the client it leaves (only the flooding tenants' jobs wait).
FLOOD_JOIN_WAIT_SECONDS = 5.0


def positional_produce(client: Any) -> Produce:
    """``client.produce``, to be called with every argument positional, in the order of
    confluent-kafka's own signature (its stub, ``cimpl.pyi``: ``callback`` and
    ``on_delivery`` are aliases, ``timestamp`` 0 is "now"), the job id header's value as
    bytes (Kafka stores a header's value as bytes either way).

    Keyword arguments cost about a third of a ``produce`` call (its C argument parser
    matches each name), and ``produce`` is called once per job. Another client (tests,
    instrumentation) is called with keyword arguments and the id as text.
    """
    produce = client.produce
    if getattr(type(client), "produce", None) is confluent_kafka.Producer.produce:
        return cast(Produce, produce)

    def by_keyword(
        topic: str,
        value: bytes,
        key: bytes,
        partition: int,
        on_delivery: Callback,
        alias: None,
        timestamp: int,
        headers: list[Any],
    ) -> None:
        name, job_id = headers[0]
        headers[0] = (name, job_id.decode())
        produce(topic, value, key, partition=partition, on_delivery=on_delivery, headers=headers)

    return by_keyword


class Producer:
    """Publishes jobs to Kafka. Use as a context manager, or call ``close()``.

    ``settings`` default to ``app.settings`` or ``TENANTQ_*``; ``app`` (optional) supplies the
    payload models and default queues of known job types. Extra keyword arguments are
    librdkafka settings (``linger_ms=20`` or ``**{"linger.ms": 20}``) that win over both.
    ``kafka_client`` replaces the confluent-kafka producer (tests, instrumentation).

    A tenant that floods the producer (``producer.flood_rate_per_second``,
    ``tenantq.producer.flood_meter``) gets a second Kafka client of the same configuration, so
    that the other tenants' jobs are not queued behind its requests; ``flood_kafka_client``
    replaces that one (with ``kafka_client`` given and not it, every tenant shares one client).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        app: App | None = None,
        *,
        placement_book: PlacementBook | None = None,
        latency_guard: LatencyGuard | None = None,
        kafka_client: Any = None,
        flood_kafka_client: Any = None,
        clock: Callable[[], float] = time.monotonic,
        **kafka_overrides: Any,
    ) -> None:
        self.settings = settings or (app.settings if app is not None else load_settings())
        self.app = app
        self._clock = clock
        producer_settings = self.settings.producer
        self._placement_watcher: PlacementWatcher | None = None
        if placement_book is None:
            loader = None
            if self.settings.database_url is not None:
                loader = PlacementReader(self.settings)
            placement_book = PlacementBook(loader, producer_settings.placement_ttl_seconds, clock)
            if loader is not None and producer_settings.placement_watch:
                self._placement_watcher = PlacementWatcher(self.settings, placement_book.changed)
                self._placement_watcher.start()
        self._placements = placement_book
        self._admission = TenantAdmission(producer_settings, clock)
        self._owned_probe: CommittedOffsetAgeProbe | None = None
        if latency_guard is None and producer_settings.latency_budget_seconds is not None:
            self._owned_probe = CommittedOffsetAgeProbe(self.settings)
            latency_guard = LatencyGuard(
                producer_settings.latency_budget_seconds, self._owned_probe, clock=clock
            )
        self._latency_guard = latency_guard
        self._fatal_error: confluent_kafka.KafkaError | None = None
        # What the client reports (served by the delivery thread): a refused login ends the
        # next metadata wait at once, with the cluster's reason (``tenantq.kafka_access``).
        self._client_report = ClientReport(self.settings.kafka_bootstrap_servers or "")
        self._refusal_logged = False
        #: Makes the flood client, the first time a tenant floods (None: no flood client).
        self._new_flood_client: Callable[[], Any] | None = None
        if kafka_client is None:
            config = producer_config(self.settings, kafka_overrides)
            config.setdefault("error_cb", self._on_client_error)
            config.setdefault("logger", self._client_report)
            kafka_client = confluent_kafka.Producer(config)
            # A transactional id names one producer: a second client would fence the first.
            if "transactional.id" not in config:
                flood_config = {**config, "client.id": f"{config['client.id']}-flood"}
                self._new_flood_client = lambda: confluent_kafka.Producer(flood_config)
        elif flood_kafka_client is not None:
            self._new_flood_client = lambda: flood_kafka_client
        self._kafka = kafka_client
        self._produce = positional_produce(kafka_client)
        self._resender = Resender(kafka_client)
        self._partition_counts: dict[str, tuple[float, int]] = {}
        self._preparer = RequestPreparer(
            self.settings,
            app,
            self._placements,
            self.partition_count,
            new_job_id_ints,
            new_job_id_block,
        )
        # Scheduled jobs get a pending row once Kafka holds them (only with database access).
        self._pending_rows = (
            PendingRecorder(self.settings, app) if self.settings.database_url is not None else None
        )
        # Unique jobs: a keyed request whose key names a job reports it (database access).
        self._unique = UniqueJobs(self.settings) if self.settings.database_url else None
        self._closed = False
        self._reports = DeliveryReports(
            kafka_client, self._pending_rows.write if self._pending_rows is not None else None
        )
        #: Every tenant's jobs, but those of the tenants that flood.
        self._shared = Channel(kafka_client, self._produce, self._reports)
        #: The flooding tenants' jobs: made by ``_flood_channel`` when the first one floods.
        self._flood: Channel | None = None
        self._flood_made = threading.Lock()
        flood_rate = producer_settings.flood_rate_per_second
        self._flood_meter = (
            FloodMeter(flood_rate, clock)
            if flood_rate is not None and self._new_flood_client is not None
            else None
        )
        self._shared_only = (self._shared,)
        #: Per publishing thread, the channels its publication handed jobs to (``channels``).
        self._used = threading.local()
        #: A tenant began to flood: its jobs on the shared client are delivered before the
        #: flood channel takes more (under the flood channel's lock).
        self._flood_behind_shared = False

    # -- public API -------------------------------------------------------------------------

    def enqueue(
        self,
        job_type: str,
        *,
        tenant: str,
        payload: Any,
        **options: Unpack[EnqueueOptions],
    ) -> Future[JobRef]:
        """Validate and publish one job; the future resolves to its ``JobRef`` once Kafka has
        acknowledged it, or fails with ``EnqueueFailed``. The ``options`` (``queue``,
        ``job_id``, ``run_after``, ``delay``, ``max_attempts``, ``idempotency_key``,
        ``trace_context``) are ``EnqueueOptions``.

        Raises at once (nothing published): ``InvalidJobError`` and its children for bad
        input, ``AdmissionRejected`` / ``LatencyBudgetExceeded`` / ``QueueFull`` for
        backpressure, ``KafkaAccessRefused`` when the cluster refuses the client's credentials or
        TLS (within a second or so of the refusal, naming the cluster).

        With database access, an ``idempotency_key`` that already names a job of the queue
        resolves at once to that job's ``JobRef`` with ``created=False`` (same job type,
        tenant and payload; nothing is published) or raises ``JobConflict`` (anything else);
        ``tenantq.producer.unique`` documents the window in which two racing producers are
        both accepted and collapse at claim.
        """
        request = EnqueueRequest(job_type=job_type, tenant=tenant, payload=payload, **options)
        return self.enqueue_many([request])[0]

    def enqueue_many(
        self, requests: Iterable[EnqueueRequest | Mapping[str, Any]]
    ) -> Sequence[Future[JobRef]]:
        """Publish a batch: every request is validated and admitted before any is published.

        Returns one future per request, in order: a read-only sequence (``JobFutures``)
        whose futures are made when first read, so that jobs in flight cost the cyclic
        garbage collector nothing until the caller looks at them (``list(...)`` makes them
        all). If the local buffer stays full past the buffer timeout, ``QueueFull`` is
        raised when nothing was accepted yet; otherwise the futures of the jobs that could
        not be handed over fail with ``QueueFull`` and the accepted ones are kept.
        """
        started = time.monotonic()
        with publishing_call(self._publishing, self._published, started) as publication:
            outgoing, existing = self._prepare_and_admit(requests, publication)
            if not outgoing:
                return []
            futures = self._publish(outgoing, existing)
            self._serve_ready(started)
            return futures

    def enqueue_batch(self, requests: Iterable[EnqueueRequest | Mapping[str, Any]]) -> BatchFuture:
        """Publish a batch with ONE future for all of it: the bulk form of ``enqueue_many``.

        Validation and admission are the same and raise the same errors at once (nothing
        published). The returned ``BatchFuture`` resolves to ``JobRefs`` (a sequence of the
        ``JobRef`` of every job, in request order) once all are acknowledged, or fails with
        ``BatchEnqueueFailed`` (per-job errors by request index, plus the refs of the
        acknowledged jobs) once every job is settled. A full buffer is handled as in
        ``enqueue_many``: ``QueueFull`` if nothing was handed over, else the remaining jobs
        fail inside the batch result.
        """
        started = time.monotonic()
        with publishing_call(self._publishing, self._published, started) as publication:
            outgoing, existing = self._prepare_and_admit(requests, publication)
            batch = BatchFuture(outgoing, existing, self._resender)
            if existing:
                positions = [index for index in range(len(outgoing)) if index not in existing]
                if positions:
                    self._publish_batch(outgoing.subset(positions), batch, positions)
                    self._serve_ready(started)
            elif outgoing:
                self._publish_batch(outgoing, batch)
                self._serve_ready(started)
            return batch

    async def enqueue_async(self, job_type: str, **arguments: Any) -> JobRef:
        """``enqueue`` for asyncio code: awaits the acknowledgement and returns the ``JobRef``.

        Validation and admission errors raise here; a full buffer blocks the event loop for
        at most ``buffer_timeout_seconds``.
        """
        return await asyncio.wrap_future(self.enqueue(job_type, **arguments))

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until every published job is acknowledged (or failed) or ``timeout`` passes.
        Returns how many are still waiting; their futures stay pending."""
        deadline = time.monotonic() + timeout
        remaining = self._reports.flush(timeout)
        flood = self._flood
        if flood is not None:
            remaining += flood.reports.flush(max(0.0, deadline - time.monotonic()))
        return remaining

    def close(self, timeout: float = 30.0) -> int:
        """Flush, then stop. Jobs still unacknowledged after ``timeout`` are purged and their
        futures fail with ``EnqueueFailed`` (``possibly_persisted`` for those in flight).
        Returns how many jobs were not delivered."""
        if self._closed:
            return 0
        self._closed = True
        remaining = self.flush(timeout)
        channels = [self._shared] if self._flood is None else [self._shared, self._flood]
        if remaining:
            logger.warning("%d jobs unacknowledged after %.1fs; failing them", remaining, timeout)
            for channel in channels:
                channel.client.purge(in_queue=True, in_flight=True, blocking=False)
            for channel in channels:
                channel.reports.flush(min(timeout, 5.0))
        for channel in channels:
            channel.reports.stop()
            channel.client.poll(0)
        if self._pending_rows is not None:
            self._pending_rows.write(now_or_never=True)
            self._pending_rows.close()
        if self._owned_probe is not None:
            self._owned_probe.close()
        if self._unique is not None:
            self._unique.close()
        if self._placement_watcher is not None:
            self._placement_watcher.stop(2.0)
        close_placements = getattr(self._placements, "close", None)
        if close_placements is not None:
            close_placements()
        return int(remaining)

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        undelivered = self.close()
        if undelivered and exc is None:
            raise EnqueueFailed(
                f"{undelivered} jobs were not acknowledged before the producer closed; "
                "their futures carry the error",
                retriable=True,
                possibly_persisted=True,
            )

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` from cluster metadata, cached for a minute."""
        cached = self._partition_counts.get(topic)
        now = self._clock()
        if cached is not None and now < cached[0]:
            return cached[1]
        try:
            metadata = read_metadata(
                self._kafka, self._client_report, topic=topic, timeout=METADATA_TIMEOUT_SECONDS
            )
        except confluent_kafka.KafkaException as error:
            if cached is not None:
                return cached[1]  # the broker is briefly unreachable: the count rarely changes
            raise EnqueueFailed(
                f"cannot read the metadata of topic {topic!r}: {error}",
                retriable=True,
                possibly_persisted=False,
            ) from None
        topic_metadata = metadata.topics.get(topic)
        if (
            topic_metadata is None
            or topic_metadata.error is not None
            or not topic_metadata.partitions
        ):
            raise ConfigurationError(f"topic {topic!r} does not exist; run `tenantq topics ensure`")
        count = len(topic_metadata.partitions)
        self._partition_counts[topic] = (now + PARTITION_COUNT_TTL_SECONDS, count)
        return count

    # -- internals ----------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise EnqueueFailed("the producer is closed", retriable=False, possibly_persisted=False)
        if self._fatal_error is not None:
            raise EnqueueFailed(
                f"the Kafka producer failed fatally ({self._fatal_error.str()}); create a new one",
                retriable=True,
                possibly_persisted=False,
            )

    def _prepare_and_admit(
        self,
        requests: Iterable[EnqueueRequest | Mapping[str, Any]],
        publication: Publication | None = None,
    ) -> tuple[PreparedJobs, dict[int, JobRef]]:
        """Every request validated, placed and admitted, and {index: existing job} of those
        whose idempotency key names one; raises before anything is published. A traced call's
        ``publication`` gives its context to the envelopes and is told what they are."""
        self._check_usable()
        if not isinstance(requests, list | tuple):
            requests = list(requests)
        if publication is None:
            outgoing = self._preparer.prepare_all(requests, dt.datetime.now(dt.UTC))
        else:
            outgoing = self._preparer.prepare_all(
                requests, dt.datetime.now(dt.UTC), publication.trace_context
            )
            describe_publication(publication, outgoing, requests)
        existing: dict[int, JobRef] = {}
        if self._unique is not None and outgoing.keyed:
            existing = self._unique.existing(requests, outgoing)
        new = (
            outgoing.subset(index for index in range(len(outgoing)) if index not in existing)
            if existing
            else outgoing
        )
        if new:
            if self._admission.enabled:
                self._admission.admit(new.tenant_counts())
            if self._latency_guard is not None:
                for queue in new.queues():
                    self._latency_guard.check(queue)
        return outgoing, existing

    def _publish(self, outgoing: PreparedJobs, existing: dict[int, JobRef]) -> JobFutures:
        """The jobs of ``outgoing`` not named by their key (``existing``), published with one
        callback for all of them; after a full buffer, the rest fail with ``QueueFull``."""
        futures = JobFutures(outgoing, existing, self._resender)
        positions: list[int] = []
        if existing:
            positions = [index for index in range(len(outgoing)) if index not in existing]
            if not positions:
                return futures
            outgoing = outgoing.subset(positions)

        def fail(index: int, failure: BaseException) -> None:
            futures.fail(positions[index] if existing else index, failure)

        stopped = self._hand_over(outgoing, itertools.repeat(futures.on_delivery), fail)
        if stopped is not None:
            unsent, full = stopped
            fail(unsent[0], full)
            for index in unsent[1:]:
                fail(index, QueueFull(str(full), retry_after=full.retry_after))
        return futures

    def _publish_batch(
        self, outgoing: PreparedJobs, batch: BatchFuture, positions: list[int] | None = None
    ) -> None:
        """One callback for the batch; after a full buffer, the rest fail inside its result.
        ``positions``: the index in the batch of each message (default: the same)."""

        def fail(index: int, failure: EnqueueFailed) -> None:
            batch.fail(index if positions is None else positions[index], failure)

        stopped = self._hand_over(outgoing, itertools.repeat(batch.on_delivery), fail)
        if stopped is not None:
            unsent, full = stopped
            for index in unsent:
                fail(
                    index,
                    EnqueueFailed(
                        f"job {outgoing[index].job_id} was not handed to Kafka: {full}",
                        retriable=True,
                        possibly_persisted=False,
                    ),
                )

    def _hand_over(
        self,
        outgoing: PreparedJobs,
        callbacks: Sequence[Callback] | Iterator[Callback],
        refused: Callable[[int, EnqueueFailed], None],
    ) -> tuple[list[int], QueueFull] | None:
        """``produce`` every message with its delivery callback (``callbacks``: one per
        message, or one repeated without end), through the channel of its tenant.

        A message the client refuses outright is settled through ``refused``. A full buffer
        is waited out for ``buffer_timeout_seconds``; if it stays full, ``QueueFull`` is
        raised when nothing was handed over yet, else returned with the indexes of the
        messages not handed over (the caller settles them). None: all handed over.
        """
        meter = self._flood_meter
        if meter is None:
            self._used.channels = self._shared_only
            stopped = self._hand_over_to(self._shared, outgoing, callbacks, refused, True)
            if stopped is None:
                return None
            first, full = stopped
            return list(range(first, len(outgoing))), full
        change = meter.count(outgoing.tenant_counts())
        if change is not None:
            self._move(meter, change)
        # The jobs not handed over yet (None: all of them), handed over one channel at a time:
        # each under its channel's lock, with the tenants that flood as they are then.
        left: list[int] | None = None
        sent = False
        while True:
            flooding = meter.flooding
            shared: list[int] | None = left
            flood: list[int] = []
            if flooding:
                destinations = outgoing.destinations
                shared = []
                for index in range(len(outgoing)) if left is None else left:
                    (flood if destinations[index].tenant_id in flooding else shared).append(index)
            if shared is None or shared:
                channel, part, rest = self._shared, shared, flood
            else:
                channel, part, rest = self._flood_channel(), flood, []
            if left is None:
                # This publication's channels, for ``_serve_ready``. The flood channel's
                # delivery thread keeps out of the way of the publications that reach it only,
                # and the shared one's is let go as soon as one does not reach it: each serves
                # as a producer of its own would (``DeliveryReports.publishing``).
                self._used.channels = (channel,) if not rest else (channel, self._flood_channel())
                if channel is not self._shared:
                    self._reports.not_publishing()
                if rest or channel is not self._shared:
                    self._flood_channel().reports.publishing(time.monotonic())
            if left is None and not rest and part is not None and len(part) == len(outgoing):
                part = None  # the whole publication goes through one channel
            with channel.lock:
                if meter.flooding is not flooding:
                    continue  # a tenant moved meanwhile: its jobs go where it is now
                if channel is not self._shared and self._flood_behind_shared:
                    # A tenant began to flood: its earlier jobs, on the shared client, go first.
                    self._reports.flush(FLOOD_JOIN_WAIT_SECONDS)
                    self._flood_behind_shared = False
                stopped = self._hand_over_part(channel, outgoing, part, callbacks, refused, sent)
            if stopped is not None:
                first, full = stopped
                unsent = list(range(first, len(outgoing))) if part is None else part[first:]
                return sorted(unsent + rest), full
            if not rest:
                return None
            sent = True
            left = rest

    def _hand_over_part(
        self,
        channel: Channel,
        outgoing: PreparedJobs,
        part: list[int] | None,
        callbacks: Sequence[Callback] | Iterator[Callback],
        refused: Callable[[int, EnqueueFailed], None],
        sent: bool,
    ) -> tuple[int, QueueFull] | None:
        """``_hand_over_to`` of the jobs of ``outgoing`` at ``part`` (None: all of them); the
        index returned is one of ``part``'s."""
        if part is None:
            return self._hand_over_to(channel, outgoing, callbacks, refused, not sent)
        chosen = part
        return self._hand_over_to(
            channel,
            outgoing.subset(chosen),
            callbacks if isinstance(callbacks, Iterator) else [callbacks[i] for i in chosen],
            lambda index, failure: refused(chosen[index], failure),
            not sent,
        )

    def _hand_over_to(
        self,
        channel: Channel,
        outgoing: PreparedJobs,
        callbacks: Iterable[Callback],
        refused: Callable[[int, EnqueueFailed], None],
        nothing_sent: bool,
    ) -> tuple[int, QueueFull] | None:
        """``produce`` every message of ``outgoing`` to ``channel``, in order (``_hand_over``);
        a full buffer that stays full raises ``QueueFull`` at the first message when
        ``nothing_sent``, else returns the index of the first message not handed over."""
        # The hot loop of every enqueue: locals instead of attribute lookups per message.
        produce = channel.produce
        job_id_header = header_names.JOB_ID
        values = outgoing.values
        # Only a job with options may get a pending row (``PendingRecorder.delivery_callback``):
        # a publication without one hands each job its callback as it is.
        if outgoing.generic > 0 and self._pending_rows is not None:
            callbacks = with_pending_rows(
                self._pending_rows, outgoing, callbacks, self._resender.again
            )
        # No index per message: the position of one that fails is worked out from what is
        # left of ``remaining`` (``enumerate`` costs a fifth of the loop's own time, and a
        # failure is rare).
        remaining = iter(values)
        # Not strict: a batch passes one callback repeated without end.
        for value, destination, job_id, on_delivery in zip(
            remaining, outgoing.destinations, outgoing.ids, callbacks, strict=False
        ):
            # The header list is built here, not kept per job: librdkafka copies it, so it
            # dies at once. Positional arguments: see ``positional_produce``.
            try:
                produce(
                    destination.topic,
                    value,
                    destination.key,
                    destination.partition,
                    on_delivery,
                    None,
                    0,
                    [(job_id_header, job_id), *destination.extra_headers],
                )
            except (BufferError, confluent_kafka.KafkaException) as error:
                index = len(values) - length_hint(remaining) - 1
                full = self._produce_despite(channel, error, outgoing, index, on_delivery, refused)
                if full is not None:
                    if index == 0 and nothing_sent:
                        raise full from None
                    return index, full
        return None

    def _produce_despite(
        self,
        channel: Channel,
        error: Exception,
        outgoing: PreparedJobs,
        index: int,
        on_delivery: Callback,
        refused: Callable[[int, EnqueueFailed], None],
    ) -> QueueFull | None:
        """``produce`` of the job at ``index`` after ``error``: a full buffer is waited out
        (``QueueFull`` if it stays full), a refusal settled through ``refused``."""
        destination = outgoing.destinations[index]
        deadline = time.monotonic() + self.settings.producer.buffer_timeout_seconds
        while True:
            if isinstance(error, confluent_kafka.KafkaException):
                refused(
                    index,
                    EnqueueFailed(
                        f"job {outgoing.ids[index].decode()} refused by the client: {error}",
                        retriable=bool(error.args[0].retriable()),
                        possibly_persisted=False,
                    ),
                )
                return None
            if time.monotonic() >= deadline:
                return buffer_stayed_full(self.settings.producer.buffer_timeout_seconds)
            # Serving delivery reports is what frees room in librdkafka's queue.
            channel.reports.serve(0.05)
            try:
                channel.produce(
                    destination.topic,
                    outgoing.values[index],
                    destination.key,
                    destination.partition,
                    on_delivery,
                    None,
                    0,
                    [(header_names.JOB_ID, outgoing.ids[index]), *destination.extra_headers],
                )
                return None
            except (BufferError, confluent_kafka.KafkaException) as again:
                error = again

    # -- the flood channel ----------------------------------------------------------------------

    def _flood_channel(self) -> Channel:
        """The channel of the flooding tenants, made the first time one floods."""
        flood = self._flood
        if flood is None:
            with self._flood_made:
                flood = self._flood
                if flood is None:
                    assert self._new_flood_client is not None  # a meter only with a maker
                    client = self._new_flood_client()
                    flood = self._flood = Channel(
                        client, positional_produce(client), DeliveryReports(client)
                    )
        return flood

    def _move(self, meter: FloodMeter, change: FloodChange) -> None:
        """Move the tenants of ``change`` between the channels, keeping each one's order.

        A move holds the flood channel's lock, then the shared one's for the instant of the
        change (always in that order), so no publication is halfway through handing a moving
        tenant's jobs to the channel it leaves, and the other tenants' publications wait for
        no flush. A tenant that begins to flood: the next hand-over to the flood channel
        first waits for the shared client to deliver what it holds (up to
        ``FLOOD_JOIN_WAIT_SECONDS``; only flooding tenants wait for it). One that stops goes
        back only when the flood client holds nothing undelivered (else it is tried again
        at the next window).
        """
        flood = self._flood_channel()
        with flood.lock:
            leaving = change.leaving if change.leaving and flood.in_flight() == 0 else frozenset()
            with self._shared.lock:
                meter.apply(FloodChange(change.joining, leaving))
            if change.joining:
                self._flood_behind_shared = True
        if change.joining:
            logger.info(
                "tenants %s flood this producer (>= %g jobs/s): their jobs go through a Kafka "
                "client of their own",
                ", ".join(sorted(change.joining)),
                meter.rate,
            )
        if leaving:
            logger.info(
                "tenants %s no longer flood this producer: back on its shared Kafka client",
                ", ".join(sorted(leaving)),
            )

    def _publishing(self, started: float) -> None:
        """A publication begins: the shared channel's delivery thread keeps out of its way
        (the flood channel's only once the publication reaches it, ``_hand_over``)."""
        self._used.channels = self._shared_only
        self._reports.publishing(started)

    def _serve_ready(self, started: float) -> None:
        """The reports ready on the channels this thread's publication used."""
        for channel in getattr(self._used, "channels", self._shared_only):
            channel.reports.serve_ready(started)

    def _published(self) -> None:
        """The publication is over: the delivery threads of its channels may serve again."""
        for channel in getattr(self._used, "channels", self._shared_only):
            channel.reports.published()

    def _on_client_error(self, error: confluent_kafka.KafkaError) -> None:
        self._client_report.on_error(error)
        if error.fatal():
            self._fatal_error = error
            logger.error("fatal Kafka producer error: %s", error.str())
        elif is_refusal(error):
            # librdkafka tries again every few hundred milliseconds: one line, not a flood.
            if not self._refusal_logged:
                self._refusal_logged = True
                logger.error("%s", refusal_line(self._client_report.bootstrap_servers, error))
        else:
            logger.warning("Kafka producer: %s", error.str())


def with_pending_rows(
    pending_rows: PendingRecorder,
    outgoing: PreparedJobs,
    callbacks: Iterable[Callback],
    send_again: Callable[[EncodedJob, Callback, int], bool],
) -> Iterator[Callback]:
    """``callbacks`` of the jobs of ``outgoing``, each wrapped to write the job's pending row
    once Kafka holds it, where the job gets one (``PendingRecorder.delivery_callback``)."""
    for index, (destination, callback) in enumerate(
        zip(outgoing.destinations, callbacks, strict=False)
    ):
        yield pending_rows.delivery_callback(outgoing, index, destination, callback, send_again)


def buffer_stayed_full(timeout_seconds: float) -> QueueFull:
    """The failure of a job the local buffer had no room for within ``timeout_seconds``."""
    return QueueFull(
        f"the local producer buffer stayed full for {timeout_seconds:g}s "
        "(buffer_timeout_seconds); Kafka is slower than the enqueue rate",
        retry_after=1.0,
    )
