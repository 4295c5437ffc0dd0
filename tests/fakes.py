"""The test doubles of the unit tests: the one place for them.

A unit test that needs a stand-in for a collaborator imports it from here (``import fakes``:
pytest puts this folder on ``sys.path``, see ``conftest.py``) and never writes its own, so
there is one fake of each thing and it behaves the same in every test. The builders that go
with them, and any builder that more than one test module uses, are here too.

- ``FakeClock``: a clock that moves only when a test moves it, and sleeps without waiting.
- ``FakeKafkaProducer`` (with ``FakeMessage``): an in-memory ``confluent_kafka.Producer``.
- ``FakeConsumer``: a ``confluent_kafka.Consumer`` holding fetched ``FakeMessage`` records.
- ``make_settings`` and ``UNIT_TOPICS``: the settings of a producer without servers, and the
  partition counts of their topics, which ``FakeKafkaProducer`` reports by default.
- ``FakePlacementTable``: the placement table, in memory, for a ``PlacementBook``.
- The worker's collaborators: ``FakeLane`` (a ledger lane), ``FakePublisher``,
  ``FakeExecutor``, ``FakeLeaseKeeper``, ``RecordingEvents``, ``DoneOffsets`` (what is
  marked done), and ``work_item`` (a decoded message, leased or not).
- ``seeded_retry_policy``: a retry policy with round numbers and a seeded jitter.
- ``claims_over`` and ``completer_over``: the worker's ``Claims`` and ``Completer`` built
  through their constructors over a ``FakeLane``.
- ``is_tenant_id``: the SDK's tenant id rule as a yes or no, for the rules that repeat it.

Integration tests use none of this: they run against the real Kafka broker and PostgreSQL,
never a mock of either.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError

import tenantq
from tenantq.consumer.claims import Claims
from tenantq.consumer.completer import Completer
from tenantq.consumer.intake import Polled
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.throttles import Throttles
from tenantq.consumer.work import WorkItem
from tenantq.errors import InvalidTenantId
from tenantq.observability.worker_events import WorkerEvents
from tenantq.quotas.book import QuotaBook
from tenantq.quotas.shares import ShareBook
from tenantq.schemas.envelope import Envelope
from tenantq.settings import TenantDefaults
from tenantq.store.job_store import Lease
from tenantq.store.placement import PlacementRecord
from tenantq.tenant_ids import validate_tenant_id
from tenantq.topic_admin import queue_topics


class FakeClock:
    """Stands in for ``time.monotonic`` (call it) and ``time.sleep`` (``sleep``): the time is
    ``now``, which a test sets or moves; ``sleep`` records the wait in ``slept`` and moves
    ``now`` by it instead of waiting."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


#: Partition counts of every topic of ``make_settings``: a ``default`` queue of 12 partitions
#: (3 per retry tier) and a ``mail`` queue of 4 (2 per retry tier), four retry tiers each.
UNIT_TOPICS: dict[str, int] = {
    "unit.default": 12,
    "unit.mail": 4,
    **{f"unit.default.retry.{tier}": 3 for tier in range(4)},
    **{f"unit.mail.retry.{tier}": 2 for tier in range(4)},
}


def make_settings(tmp_path: Path, **overrides: Any) -> tenantq.Settings:
    """Settings for a producer without servers: topic prefix ``unit``, the queues of
    ``UNIT_TOPICS``, an unreachable broker and ``tmp_path`` as the dev home. ``overrides``
    replace whole top-level fields."""
    fields: dict[str, Any] = {
        "kafka_bootstrap_servers": "127.0.0.1:1",
        "dev_home": tmp_path,
        "topic_prefix": "unit",
        "queues": {
            "default": {"partitions": 12, "retry_partitions": 3},
            "mail": {"partitions": 4, "retry_partitions": 2},
        },
    }
    fields.update(overrides)
    return tenantq.Settings(**fields)


class FakeMessage:
    """A Kafka record as confluent-kafka hands it out: to ``on_delivery``, or from
    ``poll``/``consume`` (with ``key``, the record's ``timestamp_ms`` and no headers)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int | None,
        value: bytes,
        *,
        key: bytes = b"acme",
        timestamp_ms: int = 1_000,
        delivery_count: int | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value
        self._key, self._timestamp_ms = key, timestamp_ms
        #: A share consumer's record: how many times the broker has handed it out.
        self._delivery_count = delivery_count
        self._error = error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return self._key

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp_ms)  # (TIMESTAMP_CREATE_TIME, ms)

    def headers(self) -> None:
        return None

    def error(self) -> KafkaError | None:
        return self._error

    def delivery_count(self) -> int | None:
        return self._delivery_count


class FakeConsumer:
    """Stands in for ``confluent_kafka.Consumer`` as the worker's parts use it.

    ``held`` are the records fetched and not yet taken, as librdkafka's queue holds them:
    ``poll`` takes the first, ``consume`` up to ``num_messages`` (and fails the test if a
    ``timeout`` would make a real consumer wait for more than are there). ``calls`` records
    each read with its timeout; ``paused`` and ``resumed`` each batch of partitions given to
    ``pause`` and ``resume``, as (topic, partition) pairs, and ``paused_now`` those paused
    and not resumed since; ``stored`` each call of ``store_offsets``, as sorted (topic,
    partition, offset)."""

    def __init__(self, held: list[FakeMessage] | None = None) -> None:
        self.held = list(held or [])
        self.calls: list[tuple[str, float]] = []
        self.paused: list[list[tuple[str, int]]] = []
        self.resumed: list[list[tuple[str, int]]] = []
        self.paused_now: set[tuple[str, int]] = set()
        self.stored: list[list[tuple[str, int, int]]] = []

    def poll(self, timeout: float) -> FakeMessage | None:
        self.calls.append(("poll", timeout))
        return self.held.pop(0) if self.held else None

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.calls.append(("consume", timeout))
        if timeout > 0 and len(self.held) < num_messages:
            raise AssertionError("consume would wait the whole timeout for a full batch")
        taken, self.held = self.held[:num_messages], self.held[num_messages:]
        return taken

    def pause(self, partitions: list[Any]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self.paused.append(keys)
        self.paused_now.update(keys)

    def resume(self, partitions: list[Any]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self.resumed.append(keys)
        self.paused_now.difference_update(keys)

    def store_offsets(self, offsets: list[Any]) -> None:
        self.stored.append(sorted((p.topic, p.partition, p.offset) for p in offsets))


class FakeKafkaProducer:
    """Stands in for ``confluent_kafka.Producer`` (the ``kafka_client`` of ``Producer``).

    ``produce`` records each message in ``produced`` (a dict of its arguments) and gives it
    the next offset, counted over all topics. ``poll`` and ``flush`` deliver what is pending,
    newest first so that nothing relies on the delivery order, which librdkafka only keeps per
    partition. What a test can change:

    - ``partitions``: the topics that exist and their partition counts (``UNIT_TOPICS``
      unless given); ``list_topics`` of any other topic reports it unknown.
    - ``acknowledge = False``: nothing is delivered; ``flush`` returns how many are pending,
      and ``purge`` fails them as purged.
    - ``fail``: offset -> ``KafkaError`` code that the delivery of that message reports.
    - ``unconfirmed``: offsets whose delivery reports no error and no offset (as librdkafka
      did for messages that were then missing from their partition).
    - ``room``: how many more messages ``produce`` accepts before its buffer is full and it
      raises ``BufferError``; ``None`` (the default) is unlimited, ``0`` is full.
    """

    def __init__(self, partitions: Mapping[str, int] | None = None) -> None:
        self.partitions = dict(UNIT_TOPICS if partitions is None else partitions)
        self.produced: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, FakeMessage]] = []
        self.fail: dict[int, int] = {}
        self.unconfirmed: set[int] = set()
        self.acknowledge = True
        self.room: int | None = None
        self.lock = threading.Lock()

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        with self.lock:
            if self.room is not None:
                if self.room == 0:
                    raise BufferError("Local: Queue full")
                self.room -= 1
            message = FakeMessage(topic, options["partition"], len(self.produced), bytes(value))
            self.produced.append({"topic": topic, "value": value, "key": key, **options})
            self.pending.append((options["on_delivery"], message))

    def _deliver(self) -> int:
        if not self.acknowledge:
            return len(self.pending)
        with self.lock:
            pending, self.pending = self.pending, []
        for callback, message in reversed(pending):
            offset = message.offset()
            code = None if offset is None else self.fail.get(offset)
            if offset in self.unconfirmed:
                message = FakeMessage(message.topic(), message.partition(), None, message.value())
            callback(None if code is None else KafkaError(code), message)
        return 0

    def poll(self, timeout: float) -> int:
        time.sleep(min(timeout, 0.01))
        self._deliver()
        return 0

    def flush(self, timeout: float) -> int:
        return self._deliver()

    def purge(self, in_queue: bool, in_flight: bool, blocking: bool) -> None:
        with self.lock:
            pending, self.pending = self.pending, []
        for callback, message in pending:
            callback(KafkaError(KafkaError._PURGE_QUEUE), message)

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        count = self.partitions.get(topic)
        if count is None:
            error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            return SimpleNamespace(topics={topic: SimpleNamespace(error=error, partitions={})})
        partitions = {index: None for index in range(count)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=partitions)})


class FakePlacementTable:
    """The placement table in memory, standing in for the database as the loader of a
    ``PlacementBook``: ``rows`` by tenant, ``loads`` counts the reads, and ``failing = True``
    makes a read raise as an unreachable database would."""

    def __init__(self) -> None:
        self.rows: dict[str, PlacementRecord] = {}
        self.loads = 0
        self.failing = False

    def __call__(self, queue: str) -> list[PlacementRecord]:
        self.loads += 1
        if self.failing:
            raise OSError("database unavailable")
        return [row for row in self.rows.values() if row.queue == queue]


class FakeLane:
    """A lane of the worker's ledger: ``submit`` records each operation in ``submitted`` and
    counts it in ``pending`` (what the lane has not answered), which a test sets back;
    ``connections``: operations it runs at once."""

    def __init__(self, pending: int = 0, connections: int = 1) -> None:
        self.pending = pending
        self.connections = connections
        self.submitted: list[Any] = []

    def submit(self, operation: Any) -> None:
        self.pending += 1
        self.submitted.append(operation)


class FakePublisher:
    """Stands in for the worker's ``Publisher``: Kafka acknowledges every message, unless its
    topic is in ``refuse``. ``publish`` records what it was given in ``published``; ``send``
    records in ``sent`` and hands the acknowledgements back at the next ``serve``."""

    def __init__(self) -> None:
        self.published: list[Any] = []
        self.sent: list[Any] = []
        self.refuse: set[str] = set()
        self._serving: list[tuple[list[bool], Callable[[list[bool]], None]]] = []

    def _acknowledged(self, messages: Sequence[Any]) -> list[bool]:
        return [message.topic not in self.refuse for message in messages]

    def publish(self, messages: Sequence[Any], timeout: float = 30.0) -> list[bool]:
        self.published.extend(messages)
        return self._acknowledged(messages)

    def send(self, messages: Sequence[Any], done: Callable[[list[bool]], None]) -> None:
        self.sent.extend(messages)
        self._serving.append((self._acknowledged(messages), done))

    @property
    def sending(self) -> int:
        return len(self._serving)

    def serve(self) -> None:
        serving, self._serving = self._serving, []
        for acknowledged, done in serving:
            done(acknowledged)


class FakeExecutor:
    """Stands in for the worker's executor: ``busy`` slots are taken (a test sets it), and
    ``submit`` records each batch of tasks in ``submitted`` without running them; ``cancel``
    records (job id, reason) in ``canceled``."""

    #: Like the thread executor: a leased job waits in the worker until a slot is free.
    queues_ahead = False

    def __init__(self, busy: int = 0) -> None:
        self.busy = busy
        self.submitted: list[list[Any]] = []
        self.canceled: list[tuple[uuid.UUID, str]] = []

    def start(self) -> None:
        pass

    def submit(self, tasks: Sequence[Any]) -> None:
        self.submitted.append(list(tasks))

    def cancel(self, task: Any, reason: str) -> None:
        self.canceled.append((task.context.job_id, reason))

    def expire(self) -> list[Any]:
        return []

    def abandon(self, task: Any) -> bool:
        return True

    def running(self) -> list[Any]:
        return [task for batch in self.submitted for task in batch]

    def stop(self, timeout: float) -> None:
        pass


class RecordingEvents(WorkerEvents):
    """Worker events that record the messages read: each ``messages_read`` report in
    ``read``; every other event is ignored, as ``WorkerEvents`` ignores them."""

    def __init__(self) -> None:
        self.read: list[list[tuple[str, str, float]]] = []

    def messages_read(self, delays: list[tuple[str, str, float]]) -> None:
        self.read.append(delays)


class FakeLeaseKeeper:
    """The heartbeat as a job's context sees it: every lease is still ours. Records each
    renewal's job id in ``renewed`` and each checkpoint's (job id, attempt, progress) in
    ``checkpoints``."""

    def __init__(self) -> None:
        self.renewed: list[uuid.UUID] = []
        self.checkpoints: list[tuple[uuid.UUID, int, Any]] = []

    def renew_one(self, job_id: uuid.UUID) -> bool:
        self.renewed.append(job_id)
        return True

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        self.checkpoints.append((job_id, attempt, progress))
        return True


class DoneOffsets(list[tuple[str, int, int]]):
    """Records (topic, partition, offset) of each message marked done; ``done_items`` and
    ``done`` stand in for ``Partitions``'s."""

    def done_items(self, items: Iterable[Any]) -> None:
        self.extend((item.topic, item.partition, item.offset) for item in items)

    def done(self, topic: str, partition: int, offset: int, epoch: int) -> None:
        self.append((topic, partition, offset))


def work_item(
    tenant: str = "acme",
    *,
    job_id: uuid.UUID | None = None,
    job_type: str = "t",
    tier: int | None = None,
    lane: bool = False,
    offset: int = 5,
    attempt: int | None = None,
) -> WorkItem:
    """A decoded message of queue ``default`` at ``offset`` of partition 0 of ``p.default``
    (``p.default.lane`` when ``lane``; retry tier ``tier``), leased at ``attempt`` of 3 when
    one is given."""
    now = dt.datetime.now(dt.UTC)
    envelope = Envelope(job_id or uuid.uuid4(), "default", job_type, tenant, tenant, b"{}", now)
    topic = "p.default.lane" if lane else "p.default"
    if tier is not None:
        topic = f"p.default.retry.{tier}"
    record = Polled(topic, 0, offset, tenant.encode(), b"x", [], 0)
    item = WorkItem(
        topic, 0, offset, tenant.encode(), b"x", record, None, "default", envelope, 3, tier, lane
    )
    if attempt is not None:
        item.lease = Lease(envelope.job_id, attempt, 3, None, 0, True, now, now)
    return item


def seeded_retry_policy(jitter: float = 0.5) -> RetryPolicy:
    """Ceilings of 2 s times 3 per attempt (2, 6, 18, 54), capped at 60 s; up to a ``jitter``
    fraction of each is taken off, drawn from a seeded random source."""
    return RetryPolicy(
        base_delay=2, multiplier=3, max_delay=60, jitter=jitter, random_source=random.Random(1)
    )


def quota_parts(push: Callable[[WorkItem], None]) -> dict[str, Any]:
    """The tenant-limit parts ``Claims`` takes, with no limits known: a book of the default
    limits, an empty view of shares, the held-back jobs going back through ``push``."""
    book = QuotaBook(TenantDefaults())
    book.replace([])
    return {
        "quotas": book,
        "shares": ShareBook(book.weight),
        "throttles": Throttles(
            push=push,
            held_back=lambda items, count: None,
            events=WorkerEvents(),
            worker_id="this-worker",
        ),
        "more_waiting": lambda queue, tenant: False,
    }


def claims_over(
    lane: FakeLane,
    done: DoneOffsets,
    push: Callable[[WorkItem], None] = lambda item: None,
    publish: Callable[[list[tuple[Any, Polled]]], None] = lambda outgoing: None,
) -> Claims:
    """``Claims`` of worker ``this-worker`` on the default queue over the claims lane
    ``lane`` (the hot lane's a ``FakeLane`` of its own), marking offsets done in ``done``,
    ready jobs and held-back ones to ``push``; nothing held or unclaimed."""
    settings = tenantq.Settings()
    return Claims(
        main=lane,
        lane=FakeLane(),
        settings=settings.worker,
        worker_id="this-worker",
        topics={"default": queue_topics(settings, "default")},
        events=WorkerEvents(),
        hold=lambda items: None,
        mark_done=done.done_items,
        push=push,
        unclaimed=lambda item: None,
        publish=publish,
        **quota_parts(push),
    )


def completer_over(
    tmp_path: Path,
    lane: FakeLane,
    *,
    events: WorkerEvents | None = None,
    release_holds: Callable[[list[uuid.UUID]], set[uuid.UUID]] = lambda job_ids: set(),
    done: DoneOffsets | None = None,
    stats: dict[str, int] | None = None,
) -> Completer:
    """A ``Completer`` of worker ``w`` on the default queue writing to the results lane
    ``lane``, its publisher a ``FakePublisher``; by default no holds to release, offsets
    marked done in a ``DoneOffsets`` of its own, and no stats counted."""
    settings = make_settings(tmp_path)
    return Completer(
        settings=settings,
        topics={"default": queue_topics(settings, "default")},
        worker_id="w",
        publish=FakePublisher().publish,
        results=lane,
        events=WorkerEvents() if events is None else events,
        release_holds=release_holds,
        mark_done=(DoneOffsets() if done is None else done).done_items,
        completing=lambda job_ids: None,
        stats={} if stats is None else stats,
    )


def is_tenant_id(value: str) -> bool:
    """Whether ``validate_tenant_id`` takes ``value``."""
    try:
        validate_tenant_id(value)
    except InvalidTenantId:
        return False
    return True
