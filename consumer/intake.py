"""From polled messages to leased work: decode, wait for due retries, claim in one statement,
and sort out what the claim did not take.

| message / job row                              | what happens                                  |
| ---------------------------------------------- | --------------------------------------------- |
| undecodable, oversized, unknown schema, empty  | DLQ with the raw bytes and the reason         |
| invalid tenant id                              | DLQ (never a metric label)                    |
| max_attempts outside 0..1000 (no producer's)   | DLQ as ``invalid_field``                      |
| a row the database refuses (NUL, constraint)   | DLQ with that row's own reason                |
| retry-tier message not yet due                 | held, partition paused until it is due        |
| hot-lane message beyond its partition's window | held undecoded, partition paused, until room  |
| due but past the last tier's delay             | hops into the tier that covers the rest       |
| main-topic message of a hot-lane tenant        | sent on to the queue's lane, offset done once |
|                                                | Kafka holds the copy (the loop does not wait) |
| claimed                                        | queued for fair dispatch (or, unknown job     |
|                                                | type, sent round the tiers within a budget)   |
| job already terminal / ours already            | offset done                                   |
| cancel requested before it ran                 | canceled, offset done                         |
| attempts used up at lease time                 | dead with the reason, DLQ, offset done        |
| same job id, different payload                 | DLQ as a conflict; the original is kept       |
| job id of another deployment on the database   | DLQ as a conflict; its row is not touched     |
| leased by another live worker                  | parked, claimed again when the lease ends     |
| waiting, not due, main topic                   | offset done: its retry message owns the wait  |
| waiting and due (or a retry message) unclaimed | claimed again shortly (clock or timing race)  |
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import Message

from tenantq import headers
from tenantq.app import resolve_max_attempts
from tenantq.consumer.events import READ_FROM_HOT_LANE, READ_FROM_MAIN
from tenantq.consumer.ledger import Claim, ClaimSettings, Settle, SettleWaiting
from tenantq.consumer.outcomes import Verdict, crashed_too_often
from tenantq.consumer.work import WorkItem
from tenantq.errors import EnvelopeError, InvalidEnvelopeField, InvalidTenantId
from tenantq.partitioner.placement import LANE
from tenantq.partitioner.tenant_id import validate_tenant_id
from tenantq.producer.publisher import Outgoing, dead_letter, retry_message
from tenantq.producer.validation import MAX_ATTEMPTS_LIMIT
from tenantq.schemas.envelope import Envelope
from tenantq.schemas.envelope_reader import read_envelope
from tenantq.states import JobState
from tenantq.store.job_store import JobStatus

if TYPE_CHECKING:
    from tenantq.consumer.worker import Worker

log = logging.getLogger("tenantq.worker")

#: How often a parked job (leased by another live worker) is tried again at most.
PARK_RECHECK_SECONDS = 1.0
#: Tenant ids remembered as valid (past this, the rest are checked every time).
VALID_TENANTS_REMEMBERED = 100_000
#: A partition with at least this many messages in one poll is taken after the others.
HEAVY_IN_POLL = 64


class Polled:
    """A consumed record with the fields the client types as optional made definite.

    Its headers are read from the client's message when first asked for: most jobs succeed
    on their first attempt and never need them, and turning them into pairs cost a sixth
    of the worker's time per message."""

    __slots__ = (
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "timestamp_ms",
        "epoch",
        "_headers",
        "_message",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        timestamp_ms: int,
        message: Message | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.timestamp_ms = timestamp_ms
        #: The assignment of its partition it was read under (``Partitions.take``).
        self.epoch = 0
        self._headers = headers
        self._message = message

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        if self._headers is None:
            listed = self._message.headers() if self._message is not None else None
            self._headers = headers.header_pairs(listed)
            self._message = None
        return self._headers

    @classmethod
    def of(cls, message: Message) -> Polled:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None
        key = message.key()
        value = message.value()
        return cls(
            topic,
            partition,
            offset,
            key if isinstance(key, bytes) or key is None else str(key).encode(),
            value if isinstance(value, bytes) or value is None else str(value).encode(),
            None,
            message.timestamp()[1],
            message,
        )


@dataclass
class _Routed:
    """What one pass over messages decided: Kafka writes (hops, dead letters) with their
    source message, dead-letter reasons for metrics, and work to admit."""

    outgoing: list[tuple[Outgoing, Polled]] = field(default_factory=list)
    #: Hot-lane copies of main-topic messages: sent without waiting for Kafka.
    diverting: list[tuple[Outgoing, Polled]] = field(default_factory=list)
    dead_letters: list[tuple[str, str]] = field(default_factory=list)
    #: Per queue, messages of hot-lane tenants sent on to the lane.
    diverted: dict[str, int] = field(default_factory=dict)
    items: list[WorkItem] = field(default_factory=list)


class Intake:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        settings = worker.settings.worker
        self.claim_settings = ClaimSettings(
            settings.lease_seconds, settings.stale_owner_seconds, settings.crash_budget
        )
        self.parked: list[WorkItem] = []
        #: Messages read and held back, oldest first, each with the wall-clock time before
        #: which it must not be routed: per retry-tier partition, those not yet due; per
        #: hot-lane partition, those beyond its read-ahead window (the consumer hands out a
        #: poll's worth of one partition at a time, and decoding hundreds of lane messages
        #: that no slot will take soon stalls the loop that the other tenants' messages wait
        #: on). The partition is paused while its queue is not empty; the messages are
        #: taken, so the commit position stays at the first of them. No seek: nothing
        #: depends on a rewound position.
        self.waiting: dict[tuple[str, int], deque[tuple[float, Polled]]] = {}
        #: Tenant ids that passed ``validate_tenant_id`` (the same few recur in every poll;
        #: the regex is checked once per id, not once per message). Bounded.
        self._valid_tenants: set[str] = set()
        #: ``_max_attempts_of`` by job type (bounded like the tenants: types come from data).
        self._type_attempts: dict[str, int] = {}

    # -- messages ----------------------------------------------------------------------------

    def take(self, messages: list[Message], between: Callable[[], None] | None = None) -> None:
        """Route a poll's messages. When a few partitions make up most of the poll (a flood
        being read), the other partitions' messages go first and ``between`` (the worker's
        dispatch) runs before the flood's: a job of a quiet tenant is claimed without waiting
        for hundreds of the flood's messages to be decoded. Each partition keeps its order."""
        if between is not None and len(messages) > HEAVY_IN_POLL:
            keys = [(message.topic(), message.partition()) for message in messages]
            counts = Counter(keys)
            heavy = {key for key, count in counts.items() if count >= HEAVY_IN_POLL}
            if heavy and len(heavy) < len(counts):
                light: list[Message] = []
                flood: list[Message] = []
                for key, message in zip(keys, messages, strict=True):
                    (flood if key in heavy else light).append(message)
                self._take(light)
                between()
                self._take(flood)
                return
        self._take(messages)

    def _take(self, messages: list[Message]) -> None:
        worker = self.worker
        partitions = worker.partitions
        lane_topics = worker.lane_topics
        queue_of_topic = worker.queue_of_topic
        routed = _Routed()
        now = time.time()
        #: (queue, source, seconds since the Kafka timestamp) of what the main topics and the
        #: lanes gave, apart: a lane's backlog waits by design and would hide the main topic's.
        read_delays: list[tuple[str, str, float]] = []
        for message in map(Polled.of, messages):
            topic, partition, offset = message.topic, message.partition, message.offset
            epoch = partitions.take(topic, partition, offset, message.timestamp_ms)
            if not epoch:
                continue  # a revoked partition: its next owner reads it again
            message.epoch = epoch
            queue_name, tier = queue_of_topic[topic]
            lane = topic in lane_topics
            if tier is None and message.timestamp_ms > 0:
                source = READ_FROM_HOT_LANE if lane else READ_FROM_MAIN
                read_delays.append((queue_name, source, now - message.timestamp_ms / 1000))
            key = (topic, partition)
            waiting = self.waiting.get(key)
            if waiting is not None:
                waiting.append((0.0, message))
                continue
            # A main-topic message may be routed at once (``_route_at`` is for the tiers).
            if (tier is not None and self._route_at(message, 0.0) > now) or (
                lane and partitions.over_window(topic, partition, held=0)
            ):
                self.waiting[key] = deque([(0.0, message)])
                partitions.pause_waiting(worker.consumer, topic, partition)
                continue
            self._route(message, routed, queue_name, tier, lane)
        if read_delays:
            worker.events.messages_read(read_delays)
        self._finish(routed)

    def route_due(self) -> None:
        """Route the waiting messages that came due; keep their partitions paused otherwise."""
        if not self.waiting:
            return
        worker = self.worker
        routed = _Routed()
        now = time.time()
        for key, waiting in list(self.waiting.items()):
            topic, partition = key
            if not worker.partitions.owns(topic, partition):
                del self.waiting[key]
                continue
            lane = topic in worker.lane_topics
            while waiting:
                not_before, message = waiting[0]
                route_at = self._route_at(message, not_before)
                if route_at > now or (
                    lane and worker.partitions.over_window(topic, partition, len(waiting) - 1)
                ):
                    worker.partitions.pause_waiting(worker.consumer, topic, partition)
                    break
                waiting.popleft()
                self._route(message, routed, *worker.queue_of_topic[topic], lane)
            if not waiting:
                del self.waiting[key]
                worker.partitions.resume_due(worker.consumer, topic, partition)
        self._finish(routed)

    def drop_waiting(self, keys: set[tuple[str, int]] | None) -> None:
        """Forget the waiting messages of partitions given up (all when None); they stay
        uncommitted, so the next owner reads them again."""
        for key in list(self.waiting):
            if keys is None or key in keys:
                del self.waiting[key]

    def _route_at(self, message: Polled, not_before: float) -> float:
        """Wall-clock time at which a message may be routed: a retry-tier message waits for
        its due time, or for its tier's delay to pass (then it hops onwards)."""
        queue_name, tier = self.worker.queue_of_topic[message.topic]
        if tier is None:
            return not_before
        due_ms = _due_ms(message.headers)
        if due_ms is None:
            return not_before
        route_ms = float(due_ms)
        if message.timestamp_ms > 0:
            delay = self.worker.settings.queue(queue_name).retry_delays_seconds[tier]
            route_ms = min(route_ms, message.timestamp_ms + delay * 1000)
        return max(not_before, route_ms / 1000)

    def _route(
        self, message: Polled, routed: _Routed, queue_name: str, tier: int | None, lane: bool
    ) -> None:
        """A message whose time has come: hop it onwards, dead-letter it, or make it work.
        ``queue_name``, ``tier`` and ``lane`` are its topic's (``queue_of_topic``, lane or
        not), which the caller has looked up already."""
        worker = self.worker
        topic, partition, offset = message.topic, message.partition, message.offset
        if tier is not None:
            due_ms = _due_ms(message.headers)
            if due_ms is not None and due_ms > time.time() * 1000:
                # The tier's delay has passed but the job is not due: hop onwards.
                routed.outgoing.append(
                    (self._hop(message, queue_name, message.headers, due_ms), message)
                )
                return
        value = message.value
        try:
            envelope = read_envelope(value, max_bytes=worker.settings.max_message_bytes)
            tenant_id = envelope.tenant_id
            if tenant_id not in self._valid_tenants:
                validate_tenant_id(tenant_id)
                if len(self._valid_tenants) < VALID_TENANTS_REMEMBERED:
                    self._valid_tenants.add(tenant_id)
            limit = envelope.max_attempts
            if limit is not None and not 0 <= limit <= MAX_ATTEMPTS_LIMIT:
                # No producer of tenantq writes it: a job that could retry for ever, or that
                # the job table refuses. 0 reads as unset, as it always has.
                raise InvalidEnvelopeField(
                    f"max_attempts {limit} is outside 0..{MAX_ATTEMPTS_LIMIT}"
                )
        except (EnvelopeError, InvalidTenantId) as error:
            reason = getattr(error, "reason", "invalid_tenant")
            log.warning("undecodable message %s[%d]@%d: %s", topic, partition, offset, error)
            letter = dead_letter(
                worker.topics[queue_name],
                key=message.key,
                value=value,
                base_headers=message.headers,
                error_class=f"Undecodable:{reason}",
                error_message=str(error),
                attempts=0,
                worker=worker.worker_id,
                source=(topic, partition, offset),
                max_body_bytes=worker.settings.max_message_bytes,
            )
            routed.outgoing.append((letter, message))
            routed.dead_letters.append((queue_name, f"Undecodable:{reason}"))
            return
        if tier is None and not lane:
            if worker.hot_lane.in_lane(queue_name, envelope.tenant_id):
                # The tenant floods this partition: its job waits in the lane, not here.
                self._divert(message, queue_name, envelope, routed)
                return
            worker.partitions.note_tenant(topic, partition, offset, envelope.tenant_id)
        max_attempts = envelope.max_attempts or self._max_attempts_of(envelope.job_type)
        # By position, in the order of WorkItem's fields (topic, partition, offset, key, value,
        # record, timestamp_ms, queue, envelope, max_attempts, tier, lane): once per message,
        # and a call by keyword costs more than twice as much.
        routed.items.append(
            WorkItem(
                topic,
                partition,
                offset,
                message.key,
                value or b"",
                message,
                message.timestamp_ms,
                queue_name,
                envelope,
                max_attempts,
                tier,
                lane,
            )
        )

    def _max_attempts_of(self, job_type: str) -> int:
        """Max attempts of a job of ``job_type`` that did not set its own: the type's, else
        the worker's default (``resolve_max_attempts``), looked up once per type: the app's
        job types and the settings do not change while the worker runs."""
        known = self._type_attempts.get(job_type)
        if known is None:
            known = resolve_max_attempts(
                None,
                self.worker.app.find(job_type),
                self.worker.settings.worker.default_max_attempts,
            )
            if len(self._type_attempts) < VALID_TENANTS_REMEMBERED:
                self._type_attempts[job_type] = known
        return known

    def _finish(self, routed: _Routed) -> None:
        worker = self.worker
        self._publish_and_mark(routed.outgoing)
        self._send_and_mark(routed.diverting)
        for queue_name, reason in routed.dead_letters:
            worker.events.dead_lettered(queue_name, "(undecodable)", reason)
        for queue_name, count in routed.diverted.items():
            worker.events.lane_diverted(queue_name, count)
        self.admit(routed.items)

    def divert(self, items: list[WorkItem]) -> None:
        """Move read, unclaimed main-topic items of hot-lane tenants to the lane (their tenant
        was just moved): published there, then done here."""
        routed = _Routed()
        for item in items:
            self._divert(item.record, item.queue, item.envelope, routed)
        self._finish(routed)

    def _divert(
        self, message: Polled, queue_name: str, envelope: Envelope, routed: _Routed
    ) -> None:
        """The same record, for the queue's lane: any partition, drawn from the job id (as a
        producer places a lane job), so every worker shares the tenant's backlog."""
        partitions = self.worker.settings.queue(queue_name).partitions
        _, partition = LANE.choose(envelope.tenant_id, envelope.job_id, partitions)
        lane = self.worker.topics[queue_name].lane
        routed.diverting.append(
            (Outgoing(lane, message.key, message.value, message.headers, partition), message)
        )
        routed.diverted[queue_name] = routed.diverted.get(queue_name, 0) + 1

    def _hop(
        self, message: Polled, queue_name: str, raw_headers: list[tuple[str, bytes]], due_ms: int
    ) -> Outgoing:
        worker = self.worker
        definition = worker.settings.queue(queue_name)
        wait = max(0.0, due_ms / 1000 - time.time())
        found = dict(raw_headers).get(headers.DELAY_REASON, b"").decode(errors="replace")
        try:
            reason = headers.DelayReason(found)
        except ValueError:  # written by an older or foreign producer: it waits all the same
            reason = headers.DelayReason.RETRY
        return retry_message(
            worker.topics[queue_name],
            definition.retry_delays_seconds,
            key=message.key,
            value=message.value or b"",
            base_headers=raw_headers,
            wait_seconds=wait,
            reason=reason,
            partition=message.partition % definition.tier_partitions,
        )

    def _publish_and_mark(self, outgoing: list[tuple[Outgoing, Polled]]) -> None:
        """Publish and, once Kafka holds each message, mark its source offset done. What
        Kafka did not take waits a second and is routed again."""
        if not outgoing:
            return
        acknowledged = self.worker.publisher.publish([message for message, _ in outgoing])
        self._mark([source for _, source in outgoing], acknowledged)

    def _send_and_mark(self, outgoing: list[tuple[Outgoing, Polled]]) -> None:
        """``_publish_and_mark`` without waiting: the sources are marked when the publisher
        hands the acknowledgements back (``Publisher.serve``, on the poll thread). Until then
        their offsets are unfinished, so nothing is committed past a copy Kafka lacks."""
        if not outgoing:
            return
        sources = [source for _, source in outgoing]
        self.worker.publisher.send(
            [message for message, _ in outgoing],
            lambda acknowledged: self._mark(sources, acknowledged),
        )

    def _mark(self, sources: list[Polled], acknowledged: list[bool]) -> None:
        worker = self.worker
        retry_at = time.time() + 1.0
        for source, ok in zip(sources, acknowledged, strict=True):
            if ok:
                worker.partitions.done(source.topic, source.partition, source.offset, source.epoch)
                continue
            if not worker.partitions.current(source.topic, source.partition, source.epoch):
                continue  # given up since: its next owner reads it again
            key = (source.topic, source.partition)
            self.waiting.setdefault(key, deque()).appendleft((retry_at, source))
            worker.partitions.pause_waiting(worker.consumer, source.topic, source.partition)

    # -- claims ------------------------------------------------------------------------------

    def admit(self, items: list[WorkItem]) -> None:
        """Queue decoded messages for fair dispatch; they are claimed when chosen to run, so
        an attempt is only spent on a job that is about to start."""
        for item in items:
            self.worker.dispatcher.push(item)

    def claim(self, items: list[WorkItem]) -> None:
        """Hand the chosen items to the claims lane, one statement for all; ``claimed`` sorts
        out the answer. Returns at once."""
        if not items:
            return
        worker = self.worker
        unique: dict[uuid.UUID, WorkItem] = {}
        for item in items:
            if item.job_id in unique:
                # Two messages of one job in one round (a producer retry, or a main-topic
                # message read again next to the job's retry message): each is judged on its
                # own, in the next round, once this round has decided the first. Marking the
                # second done here would lose the job when the first is the one set aside.
                worker.unreserve(item)
                worker.dispatcher.push(item)
            else:
                unique[item.job_id] = item
        # The hot lane's jobs are claimed on a connection of their own (see ``ledger``).
        for lane_items, ledger_lane in (
            (False, worker.ledger.claims),
            (True, worker.ledger.lane_claims),
        ):
            chosen = [item for item in unique.values() if item.lane is lane_items]
            if chosen:
                ledger_lane.submit(
                    Claim(
                        [item.claim_request() for item in chosen],
                        context=chosen,
                        settings=self.claim_settings,
                    )
                )

    def claimed(self, operation: Claim) -> list[WorkItem]:
        """The claims lane answered: returns the items now leased to us. The rest are sorted
        out (done, parked, buried, dead-lettered); rows the database refused go to the DLQ
        with its reason."""
        worker = self.worker
        items: list[WorkItem] = operation.context
        answer = operation.answer
        if answer is None:
            # The lane never ran it (stopping, or a fault it logged): nothing is known of
            # these jobs, so nothing is done. They are claimed again shortly.
            retry_at = time.monotonic() + PARK_RECHECK_SECONDS
            for item in items:
                item.retry_claim_at = retry_at
            self.parked.extend(items)
            return []
        leases = answer.leases
        statuses = answer.statuses
        refused = {request.job_id: reason for request, reason in operation.refused}
        claimed = []
        rest = []
        for item in items:
            lease = leases.get(item.job_id)
            if lease is None:
                if item.job_id not in refused:
                    rest.append(item)
                continue
            item.lease = lease
            # An adopted lease (our own, from a try whose connection dropped) is no takeover.
            if not lease.inserted and item.tier is None and not (answer and answer.again):
                worker.events.lease_takeover(item.queue)
            claimed.append(item)
        worker.hold(claimed)
        # Each refused row goes with its own reason, not the batch's.
        for reason in sorted(set(refused.values())):
            self._dead_letter_items(
                [item for item in items if refused.get(item.job_id) == reason],
                "DatabaseRefused",
                reason,
            )
        if rest:
            self._sort_out(rest, statuses)
        return claimed

    def unknown_type_verdict(self, item: WorkItem) -> Verdict:
        """No handler here: maybe a deploy is rolling out. Retry within a budget, then dead."""
        worker = self.worker
        assert item.lease is not None
        budget = min(item.lease.max_attempts, worker.settings.worker.unknown_type_attempts)
        message = f"unknown job type {item.job_type!r} (no handler in this worker group)"
        if item.lease.attempt >= budget:
            return Verdict.dead("UnknownJobType", message)
        delay = worker.retry_policy.delay(item.lease.attempt)
        return Verdict.retrying(
            "UnknownJobType", message, delay, reason=headers.DelayReason.UNKNOWN_TYPE
        )

    def _sort_out(self, items: list[WorkItem], statuses: dict[uuid.UUID, JobStatus]) -> None:
        worker = self.worker
        crash_budget = self.claim_settings.crash_budget
        now = time.monotonic()
        done: list[WorkItem] = []
        to_cancel: list[WorkItem] = []
        #: (item, error class, why) of each job that goes dead at lease time.
        to_bury: list[tuple[WorkItem, str, str]] = []
        conflicts: list[WorkItem] = []
        foreign: list[WorkItem] = []
        for item in items:
            status = statuses.get(item.job_id)
            if status is not None and status.of_another_deployment:
                foreign.append(item)  # forged or misrouted: not this deployment's job
            elif status is None:
                # Not inserted: its idempotency key belongs to another job. The original
                # stands; this copy is a duplicate by key.
                log.info(
                    "job %s: idempotency key %r already used",
                    item.job_id,
                    item.envelope.idempotency_key,
                )
                done.append(item)
            elif status.state.terminal:
                done.append(item)
            elif status.payload_sha256 not in (None, item.payload_sha256):
                conflicts.append(item)
            elif status.cancel_requested and status.state is not JobState.LEASED:
                to_cancel.append(item)
            elif (status.attempts >= status.max_attempts or status.crashes >= crash_budget) and (
                status.state is not JobState.LEASED or status.lease_left_seconds <= 0
            ):
                to_bury.append((item, *_burial(status, crash_budget)))
            elif (
                status.state is JobState.LEASED
                and status.lease_owner == worker.worker_id
                and item.tier is None
            ):
                done.append(item)  # already running here: the lower offset holds the commit
            elif status.state is JobState.LEASED:
                # Leased elsewhere: tried again when the lease may have ended. Leased here, a
                # retry-tier message is the next attempt's wake-up, published before this
                # worker's result of the last attempt was written (a results lane still
                # catching up after an outage): marked done, it would leave the job
                # 'retrying' with nothing to run it. It waits for that result instead.
                item.retry_claim_at = now + min(
                    PARK_RECHECK_SECONDS, max(0.05, status.lease_left_seconds)
                )
                self.parked.append(item)
            elif item.tier is None and not status.due:
                done.append(item)  # waiting for a retry or a due time: its retry-tier message
            else:
                # Leasable, yet the claim missed it: due by the worker's clock before the
                # database's, or due between the claim and this look. Claim it again shortly;
                # marking it done would leave nothing to run it.
                item.retry_claim_at = now + (0.05 if status.due else 0.2)
                self.parked.append(item)
        for item in done:
            worker.mark_done(item)
        self._dead_letter_items(
            conflicts, "JobConflict", "same job id with a different payload; the original is kept"
        )
        self._dead_letter_items(
            foreign,
            "JobConflict",
            "the job id belongs to another deployment (topic prefix) on this database; "
            "its job is not touched",
        )
        if to_cancel or to_bury:
            settle = Settle(
                [item.job_id for item in to_cancel],
                [item.job_id for item, _, _ in to_bury],
                crash_budget,
            )
            worker.ledger.claims.submit(SettleWaiting([settle], context=(to_cancel, to_bury)))

    def settled(self, operation: SettleWaiting) -> None:
        """Canceled jobs are done; buried ones get their dead letter. A job the settle did
        not change (another worker moved it meanwhile) is done here: it is that worker's now,
        or terminal."""
        worker = self.worker
        to_cancel, to_bury = operation.context
        if operation.answer is None:
            return  # never ran (stopping, or a fault it logged): the offsets stay unfinished
        canceled, buried = operation.answer
        del canceled  # a cancel that found the job moved on is done all the same
        for item in to_cancel:
            worker.mark_done(item)
        for item, error_class, why in to_bury:
            if item.job_id in buried:
                self._dead_letter_items([item], error_class, why)
            else:
                worker.mark_done(item)

    def _dead_letter_items(self, items: list[WorkItem], error_class: str, message: str) -> None:
        worker = self.worker
        outgoing = [
            (
                dead_letter(
                    worker.topics[item.queue],
                    key=item.key,
                    value=item.value,
                    base_headers=item.headers,
                    error_class=error_class,
                    error_message=message,
                    attempts=item.max_attempts,
                    worker=worker.worker_id,
                    source=item.source,
                ),
                item.record,
            )
            for item in items
        ]
        self._publish_and_mark(outgoing)

    # -- parked ----------------------------------------------------------------------------------

    def retry_parked(self) -> None:
        if not self.parked:
            return
        now = time.monotonic()
        due = [item for item in self.parked if item.retry_claim_at <= now]
        if not due:
            return
        self.parked = [item for item in self.parked if item.retry_claim_at > now]
        for item in due:
            self.worker.dispatcher.push(item)

    def drop_parked(self, predicate: Callable[[WorkItem], bool]) -> None:
        self.parked = [item for item in self.parked if not predicate(item)]


def _burial(status: JobStatus, crash_budget: int) -> tuple[str, str]:
    """Why a job found leasable goes dead at lease time: (error class, message)."""
    if status.attempts >= status.max_attempts:
        return (
            "AttemptsExhausted",
            "max attempts reached at lease time (the handler never finished: crash, kill or hang)",
        )
    return ("PoisonJob", crashed_too_often(status.crashes, crash_budget))


def _due_ms(raw_headers: list[tuple[str, bytes]]) -> int | None:
    for key, value in raw_headers:
        if key == headers.DUE_AT_MS:
            try:
                return int(value)
            except ValueError:
                return None
    return None
