"""From polled messages to work items: decode, wait for due retries, send hot-lane tenants' jobs
to their lane, dead-letter what cannot be read. What becomes work goes to fair dispatch; its
claim is ``claims``'s.

| message                                        | what happens                                  |
| ---------------------------------------------- | --------------------------------------------- |
| undecodable, oversized, unknown schema, empty  | DLQ with the raw bytes and the reason         |
| invalid tenant id                              | DLQ (never a metric label)                    |
| max_attempts outside 0..1000 (no producer's)   | DLQ as ``invalid_field``                      |
| retry-tier message not yet due                 | held, partition paused until it is due        |
| hot-lane message beyond its partition's window | held undecoded, partition paused, until room  |
| due but past the last tier's delay             | hops into the tier that covers the rest       |
| main-topic message of a hot-lane tenant        | sent on to the queue's lane, offset done once |
|                                                | Kafka holds the copy (the loop does not wait) |
| decoded                                        | queued for fair dispatch                      |

Everything here runs on the poll thread.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Message

from tenantq import headers
from tenantq.app import JobType, resolve_max_attempts
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import WorkItem
from tenantq.errors import EnvelopeError, InvalidEnvelopeField, InvalidTenantId
from tenantq.observability.worker_events import READ_FROM_HOT_LANE, READ_FROM_MAIN, WorkerEvents
from tenantq.partitioner.placement import LANE
from tenantq.producer.publisher import Outgoing, dead_letter, retry_message
from tenantq.producer.validation import MAX_ATTEMPTS_LIMIT
from tenantq.schemas.envelope import Envelope
from tenantq.schemas.envelope_reader import read_envelope
from tenantq.settings import Settings
from tenantq.tenant_ids import validate_tenant_id

log = logging.getLogger("tenantq.worker")

#: Tenant ids remembered as valid (past this, the rest are checked every time).
VALID_TENANTS_REMEMBERED = 100_000
#: A partition with at least this many messages in one poll is taken after the others.
HEAVY_IN_POLL = 64


class Polled:
    """A consumed record with the fields the client types as optional made definite.

    Its headers are read from the client's message when first asked for: most jobs succeed
    on their first attempt and never need them, and turning them into pairs is a sixth of
    the worker's time per message."""

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


class ReadPositions(Protocol):
    """What the intake needs of the book of messages read (``Partitions``; a share-group
    worker's records): track each message read, mark it done, and hold back a partition
    while its messages wait. ``consumer`` is the client that pauses, handed through."""

    def take(
        self, topic: str, partition: int, offset: int, timestamp_ms: int | None = None
    ) -> int: ...

    def owns(self, topic: str, partition: int) -> bool: ...

    def current(self, topic: str, partition: int, epoch: int) -> bool: ...

    def done(self, topic: str, partition: int, offset: int, epoch: int) -> None: ...

    def over_window(self, topic: str, partition: int, held: int) -> bool: ...

    def note_tenant(self, topic: str, partition: int, offset: int, tenant: str) -> None: ...

    def pause_waiting(self, consumer: Any, topic: str, partition: int) -> None: ...

    def resume_due(self, consumer: Any, topic: str, partition: int) -> None: ...


class Sender(Protocol):
    """What the intake needs of the publisher: send and wait, or send and be told later."""

    def publish(self, messages: Sequence[Outgoing], timeout: float = ...) -> list[bool]: ...

    def send(self, messages: Sequence[Outgoing], done: Callable[[list[bool]], None]) -> None: ...


@dataclass(eq=False, kw_only=True)
class Intake:
    """Routes polled messages (poll thread only)."""

    settings: Settings
    topics: TopicMap
    worker_id: str
    partitions: ReadPositions
    #: Only to pause and resume partitions whose messages wait here.
    consumer: Any
    publisher: Sender
    events: WorkerEvents
    #: The tenant of a queue is in the queue's hot lane (``HotLane.in_lane``).
    in_lane: Callable[[str, str], bool]
    find_type: Callable[[str], JobType | None]
    #: To fair dispatch (the dispatcher's ``push``): claimed when chosen to run, so an
    #: attempt is only spent on a job that is about to start.
    admit: Callable[[WorkItem], None]
    #: Messages read and held back, oldest first, each with the wall-clock time before
    #: which it must not be routed: per retry-tier partition, those not yet due; per
    #: hot-lane partition, those beyond its read-ahead window (the consumer hands out a
    #: poll's worth of one partition at a time, and decoding hundreds of lane messages
    #: that no slot will take soon stalls the loop that the other tenants' messages wait
    #: on). The partition is paused while its queue is not empty; the messages are
    #: taken, so the commit position stays at the first of them. No seek: nothing
    #: depends on a rewound position.
    waiting: dict[tuple[str, int], deque[tuple[float, Polled]]] = field(
        default_factory=dict, init=False
    )
    #: Tenant ids that passed ``validate_tenant_id`` (the same few recur in every poll;
    #: the regex is checked once per id, not once per message). Bounded.
    _valid_tenants: set[str] = field(default_factory=set, init=False)
    #: ``_max_attempts_of`` by job type (bounded like the tenants: types come from data).
    _type_attempts: dict[str, int] = field(default_factory=dict, init=False)

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
        partitions = self.partitions
        lane_topics = self.topics.lanes
        queue_of_topic = self.topics.queue_of
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
                partitions.pause_waiting(self.consumer, topic, partition)
                continue
            self._route(message, routed, queue_name, tier, lane)
        if read_delays:
            self.events.messages_read(read_delays)
        self._finish(routed)

    def route_due(self) -> None:
        """Route the waiting messages that came due; keep their partitions paused otherwise."""
        if not self.waiting:
            return
        partitions = self.partitions
        routed = _Routed()
        now = time.time()
        for key, waiting in list(self.waiting.items()):
            topic, partition = key
            if not partitions.owns(topic, partition):
                del self.waiting[key]
                continue
            lane = topic in self.topics.lanes
            while waiting:
                not_before, message = waiting[0]
                route_at = self._route_at(message, not_before)
                if route_at > now or (
                    lane and partitions.over_window(topic, partition, len(waiting) - 1)
                ):
                    partitions.pause_waiting(self.consumer, topic, partition)
                    break
                waiting.popleft()
                self._route(message, routed, *self.topics.queue_of[topic], lane)
            if not waiting:
                del self.waiting[key]
                partitions.resume_due(self.consumer, topic, partition)
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
        queue_name, tier = self.topics.queue_of[message.topic]
        if tier is None:
            return not_before
        due_ms = _due_ms(message.headers)
        if due_ms is None:
            return not_before
        route_ms = float(due_ms)
        if message.timestamp_ms > 0:
            delay = self.settings.queue(queue_name).retry_delays_seconds[tier]
            route_ms = min(route_ms, message.timestamp_ms + delay * 1000)
        return max(not_before, route_ms / 1000)

    def _route(
        self, message: Polled, routed: _Routed, queue_name: str, tier: int | None, lane: bool
    ) -> None:
        """A message whose time has come: hop it onwards, dead-letter it, or make it work.
        ``queue_name``, ``tier`` and ``lane`` are its topic's (``queue_of_topic``, lane or
        not), which the caller has looked up already."""
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
            envelope = read_envelope(value, max_bytes=self.settings.max_message_bytes)
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
                self.topics.by_queue[queue_name],
                key=message.key,
                value=value,
                base_headers=message.headers,
                error_class=f"Undecodable:{reason}",
                error_message=str(error),
                attempts=0,
                worker=self.worker_id,
                source=(topic, partition, offset),
                max_body_bytes=self.settings.max_message_bytes,
            )
            routed.outgoing.append((letter, message))
            routed.dead_letters.append((queue_name, f"Undecodable:{reason}"))
            return
        if tier is None and not lane:
            if self.in_lane(queue_name, envelope.tenant_id):
                # The tenant floods this partition: its job waits in the lane, not here.
                self._divert(message, queue_name, envelope, routed)
                return
            self.partitions.note_tenant(topic, partition, offset, envelope.tenant_id)
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
                self.find_type(job_type),
                self.settings.worker.default_max_attempts,
            )
            if len(self._type_attempts) < VALID_TENANTS_REMEMBERED:
                self._type_attempts[job_type] = known
        return known

    def _finish(self, routed: _Routed) -> None:
        self.publish_and_mark(routed.outgoing)
        self._send_and_mark(routed.diverting)
        for queue_name, reason in routed.dead_letters:
            self.events.dead_lettered(queue_name, "(undecodable)", reason)
        for queue_name, count in routed.diverted.items():
            self.events.lane_diverted(queue_name, count)
        admit = self.admit
        for item in routed.items:
            admit(item)

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
        partitions = self.settings.queue(queue_name).partitions
        _, partition = LANE.choose(envelope.tenant_id, envelope.job_id, partitions)
        lane = self.topics.by_queue[queue_name].lane
        routed.diverting.append(
            (Outgoing(lane, message.key, message.value, message.headers, partition), message)
        )
        routed.diverted[queue_name] = routed.diverted.get(queue_name, 0) + 1

    def _hop(
        self, message: Polled, queue_name: str, raw_headers: list[tuple[str, bytes]], due_ms: int
    ) -> Outgoing:
        definition = self.settings.queue(queue_name)
        wait = max(0.0, due_ms / 1000 - time.time())
        found = dict(raw_headers).get(headers.DELAY_REASON, b"").decode(errors="replace")
        try:
            reason = headers.DelayReason(found)
        except ValueError:  # written by an older or foreign producer: it waits all the same
            reason = headers.DelayReason.RETRY
        return retry_message(
            self.topics.by_queue[queue_name],
            definition.retry_delays_seconds,
            key=message.key,
            value=message.value or b"",
            base_headers=raw_headers,
            wait_seconds=wait,
            reason=reason,
            partition=message.partition % definition.tier_partitions,
        )

    def publish_and_mark(self, outgoing: list[tuple[Outgoing, Polled]]) -> None:
        """Publish and, once Kafka holds each message, mark its source offset done. What
        Kafka did not take waits a second and is routed again."""
        if not outgoing:
            return
        acknowledged = self.publisher.publish([message for message, _ in outgoing])
        self._mark([source for _, source in outgoing], acknowledged)

    def _send_and_mark(self, outgoing: list[tuple[Outgoing, Polled]]) -> None:
        """``publish_and_mark`` without waiting: the sources are marked when the publisher
        hands the acknowledgements back (``Publisher.serve``, on the poll thread). Until then
        their offsets are unfinished, so nothing is committed past a copy Kafka lacks."""
        if not outgoing:
            return
        sources = [source for _, source in outgoing]
        self.publisher.send(
            [message for message, _ in outgoing],
            lambda acknowledged: self._mark(sources, acknowledged),
        )

    def _mark(self, sources: list[Polled], acknowledged: list[bool]) -> None:
        partitions = self.partitions
        retry_at = time.time() + 1.0
        for source, ok in zip(sources, acknowledged, strict=True):
            if ok:
                partitions.done(source.topic, source.partition, source.offset, source.epoch)
                continue
            if not partitions.current(source.topic, source.partition, source.epoch):
                continue  # given up since: its next owner reads it again
            key = (source.topic, source.partition)
            self.waiting.setdefault(key, deque()).appendleft((retry_at, source))
            partitions.pause_waiting(self.consumer, source.topic, source.partition)


def _due_ms(raw_headers: list[tuple[str, bytes]]) -> int | None:
    for key, value in raw_headers:
        if key == headers.DUE_AT_MS:
            try:
                return int(value)
            except ValueError:
                return None
    return None
