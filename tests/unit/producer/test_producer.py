"""The producer without servers: what is checked before Kafka, and what would be published.

The Kafka client is replaced by ``fakes.FakeKafkaProducer``, which records what it is handed,
so each test can assert both the error raised and that nothing was handed to Kafka.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from fakes import FakeClock, FakeKafkaProducer, make_settings
from pydantic import BaseModel, Field

import tenantq
from tenantq import headers as header_names
from tenantq.errors import (
    AdmissionRejected,
    BatchEnqueueFailed,
    ConfigurationError,
    EnqueueFailed,
    InvalidJobError,
    InvalidTenantId,
    LatencyBudgetExceeded,
    PayloadValidationError,
    QueueFull,
)
from tenantq.partitioner.murmur2 import default_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.latency_guard import LatencyGuard
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.producer.request import LANE_BATCH_JOBS
from tenantq.schemas.envelope import SCHEMA_FINGERPRINT_HEX, decode_envelope
from tenantq.store.placement import PlacementRecord


class SendEmail(BaseModel):
    to: str = Field(min_length=3)
    subject: str
    retries: int = 0


@pytest.fixture
def kafka() -> FakeKafkaProducer:
    return FakeKafkaProducer()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def app() -> tenantq.App:
    application = tenantq.App()

    @application.job("send_email", queue="mail")
    def send_email(ctx: Any, payload: SendEmail) -> None:
        return None

    return application


@pytest.fixture
def producer(
    tmp_path: Path, kafka: FakeKafkaProducer, clock: FakeClock, app: tenantq.App
) -> Iterator[Producer]:
    settings = make_settings(tmp_path)
    book = PlacementBook(None, 5.0, clock)
    with Producer(settings, app, placement_book=book, kafka_client=kafka, clock=clock) as made:
        yield made


def email(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"to": "a@example.com", "subject": "hi"}
    payload.update(changes)
    return payload


def test_a_valid_job_is_published_where_the_partitioner_says(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    future = producer.enqueue("send_email", tenant="acme", payload=email(), max_attempts=3)
    ref = future.result(timeout=5)
    [message] = kafka.produced
    assert message["topic"] == "unit.mail"
    assert message["partition"] == default_partition(b"acme", 4) == ref.partition
    assert message["key"] == b"acme"
    headers = dict(message["headers"])
    assert headers[header_names.JOB_ID] == str(ref.job_id)
    assert headers[header_names.JOB_TYPE] == "send_email"
    assert headers[header_names.TENANT] == "acme"
    assert headers[header_names.SCHEMA_FINGERPRINT] == SCHEMA_FINGERPRINT_HEX
    envelope = decode_envelope(message["value"], max_bytes=1_000_000)
    assert envelope.job_id == ref.job_id and ref.job_id.version == 7
    assert envelope.payload_json() == {"to": "a@example.com", "subject": "hi", "retries": 0}
    assert (envelope.queue, envelope.tenant_id, envelope.max_attempts) == ("mail", "acme", 3)
    assert envelope.run_after is None
    assert ref == JobRef(ref.job_id, "unit.mail", ref.partition, 0)


def test_unknown_job_types_go_to_the_default_queue_as_plain_json(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    job_id = uuid.uuid4()
    producer.enqueue("resize", tenant="acme", payload={"w": 3}, job_id=str(job_id)).result(5)
    [message] = kafka.produced
    assert message["topic"] == "unit.default"
    envelope = decode_envelope(message["value"], max_bytes=1_000_000)
    assert envelope.job_id == job_id
    assert envelope.payload == b'{"w":3}'


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"subject": "x"}, "to: Field required"), (email(to="a"), "to: String should have at least")],
)
def test_payload_failing_its_model_names_the_field(
    producer: Producer, kafka: FakeKafkaProducer, payload: dict[str, Any], field: str
) -> None:
    with pytest.raises(PayloadValidationError, match=field):
        producer.enqueue("send_email", tenant="acme", payload=payload)
    assert kafka.produced == []


@pytest.mark.parametrize("payload", [{1, 2}, {"x": float("nan")}, {"x": object()}])
def test_payload_that_is_not_json(
    producer: Producer, kafka: FakeKafkaProducer, payload: Any
) -> None:
    with pytest.raises(PayloadValidationError, match="not JSON-serialisable"):
        producer.enqueue("resize", tenant="acme", payload=payload)
    assert kafka.produced == []


@pytest.mark.parametrize("tenant", ["", "a b", "x" * 129, "acme#1"])
def test_invalid_tenants_never_reach_kafka(
    producer: Producer, kafka: FakeKafkaProducer, tenant: str
) -> None:
    with pytest.raises(InvalidTenantId):
        producer.enqueue("resize", tenant=tenant, payload={})
    assert kafka.produced == []


@pytest.mark.parametrize("job_type", ["", "has space", "x" * 129])
def test_invalid_job_type_names(
    producer: Producer, kafka: FakeKafkaProducer, job_type: str
) -> None:
    with pytest.raises(InvalidJobError, match="job type"):
        producer.enqueue(job_type, tenant="acme", payload={})
    assert kafka.produced == []


def test_undeclared_queue(producer: Producer, kafka: FakeKafkaProducer) -> None:
    with pytest.raises(InvalidJobError, match="queue 'nope' is not declared"):
        producer.enqueue("resize", tenant="acme", payload={}, queue="nope")


def test_oversized_payload_and_envelope(tmp_path: Path, kafka: FakeKafkaProducer) -> None:
    settings = make_settings(tmp_path, max_payload_bytes=2000, max_message_bytes=1024)
    book = PlacementBook(None, 5.0)
    with Producer(settings, placement_book=book, kafka_client=kafka) as producer:
        with pytest.raises(InvalidJobError, match="limit \\(max_payload_bytes\\) is 2000"):
            producer.enqueue("resize", tenant="acme", payload={"x": "y" * 3000})
        with pytest.raises(InvalidJobError, match="limit \\(max_message_bytes\\) is 1024"):
            producer.enqueue("resize", tenant="acme", payload={"x": "y" * 1500})
    assert kafka.produced == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": float("nan")}, "finite"),
        ({"delay": float("inf")}, "finite"),
        ({"delay": -1}, ">= 0"),
        ({"delay": True}, "seconds or a timedelta"),
        ({"delay": "5"}, "seconds or a timedelta"),
        ({"delay": 400 * 86400}, "366 days"),
        ({"run_after": dt.datetime(2030, 1, 1)}, "no time zone"),
        ({"run_after": dt.datetime(9999, 1, 1, tzinfo=dt.UTC)}, "366 days"),
        ({"run_after": "2030-01-01"}, "must be a datetime"),
        ({"delay": 1, "run_after": dt.datetime.now(dt.UTC)}, "not both"),
        ({"max_attempts": 0}, "1..1000"),
        ({"max_attempts": 1001}, "1..1000"),
        ({"max_attempts": True}, "1..1000"),
        ({"max_attempts": "3"}, "1..1000"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"job_id": "not-a-uuid"}, "job_id"),
        ({"trace_context": {"a": 1}}, "trace_context"),
    ],
)
def test_absurd_options_are_refused(
    producer: Producer, kafka: FakeKafkaProducer, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidJobError, match=message):
        producer.enqueue("resize", tenant="acme", payload={}, **options)
    assert kafka.produced == []


def test_scheduled_jobs_ride_the_tier_that_covers_the_wait(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    before = time.time()
    producer.enqueue("resize", tenant="acme", payload={}, delay=20).result(5)
    producer.enqueue("resize", tenant="acme", payload={}, delay=dt.timedelta(days=10)).result(5)
    past = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    producer.enqueue("resize", tenant="acme", payload={}, run_after=past).result(5)
    producer.enqueue("send_email", tenant="acme", payload=email(), delay=3).result(5)
    first, far, due, mail = kafka.produced
    assert first["topic"] == "unit.default.retry.1"
    due_at = int(dict(first["headers"])[header_names.DUE_AT_MS])
    assert int(before * 1000) + 20_000 <= due_at <= time.time() * 1000 + 20_000
    assert dict(first["headers"])[header_names.DELAY_REASON] == "scheduled"
    envelope = decode_envelope(first["value"], max_bytes=1_000_000)
    assert envelope.run_after is not None
    assert abs(envelope.run_after.timestamp() * 1000 - due_at) < 1
    assert far["topic"] == "unit.default.retry.3"
    assert due["topic"] == "unit.default" and header_names.DUE_AT_MS not in dict(due["headers"])
    # The mail tiers have 2 partitions: the tenant key is hashed over those.
    assert mail["topic"] == "unit.mail.retry.0"
    assert mail["partition"] == default_partition(b"acme", 2)


def test_a_batch_with_one_bad_request_publishes_nothing(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    requests: list[Any] = [
        EnqueueRequest("resize", "acme", {"n": 1}),
        {"job_type": "resize", "tenant": "acme", "payload": {"n": 2}},
        {"job_type": "resize", "tenant": "bad tenant", "payload": {}},
    ]
    with pytest.raises(InvalidTenantId) as raised:
        producer.enqueue_many(requests)
    assert "request #2" in " ".join(raised.value.__notes__)
    assert kafka.produced == []
    with pytest.raises(InvalidJobError, match="unknown enqueue argument"):
        producer.enqueue_many([{"job_type": "resize", "tenant": "a", "payload": {}, "prio": 1}])


def test_enqueue_many_returns_futures_in_order(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    futures = producer.enqueue_many(
        [EnqueueRequest("resize", f"tenant-{n}", {"n": n}) for n in range(50)]
    )
    refs = [future.result(5) for future in futures]
    assert [ref.offset for ref in refs] == list(range(50))
    for n, message in enumerate(kafka.produced):
        assert message["partition"] == default_partition(f"tenant-{n}".encode(), 12)


def test_tenant_token_bucket(tmp_path: Path, kafka: FakeKafkaProducer, clock: FakeClock) -> None:
    settings = make_settings(
        tmp_path,
        producer={
            "tenant_rate_per_second": 2,
            "tenant_burst": 2,
            "tenant_rate_overrides": {"vip": 100},
        },
    )
    book = PlacementBook(None, 5.0, clock)
    with Producer(settings, placement_book=book, kafka_client=kafka, clock=clock) as producer:
        producer.enqueue("resize", tenant="acme", payload={})
        producer.enqueue("resize", tenant="acme", payload={})
        with pytest.raises(AdmissionRejected) as raised:
            producer.enqueue("resize", tenant="acme", payload={})
        assert raised.value.retry_after == pytest.approx(0.5)
        producer.enqueue("resize", tenant="other", payload={})
        requests = [EnqueueRequest("resize", "vip", {}) for _ in range(2)]
        with pytest.raises(AdmissionRejected, match="'other'"):
            producer.enqueue_many([*requests, *[EnqueueRequest("resize", "other", {})] * 2])
        # The vip tokens taken for the refused batch were given back.
        assert len(producer.enqueue_many(requests)) == 2
        clock.now += 0.5
        producer.enqueue("resize", tenant="acme", payload={})
    assert len(kafka.produced) == 6


def test_full_buffer_raises_queue_full(tmp_path: Path, kafka: FakeKafkaProducer) -> None:
    settings = make_settings(tmp_path, producer={"buffer_timeout_seconds": 0.2})
    with Producer(settings, placement_book=PlacementBook(None, 5.0), kafka_client=kafka) as made:
        kafka.room = 0
        started = time.monotonic()
        with pytest.raises(QueueFull, match="stayed full for 0.2s"):
            made.enqueue("resize", tenant="acme", payload={})
        assert 0.2 <= time.monotonic() - started < 2
        kafka.room = None


def test_placement_overrides_apply(tmp_path: Path, kafka: FakeKafkaProducer) -> None:
    rows = [PlacementRecord("default", "hot", "pinned", None, (7, 9))]
    book = PlacementBook(lambda queue: rows, 5.0)
    with Producer(make_settings(tmp_path), placement_book=book, kafka_client=kafka) as producer:
        futures = producer.enqueue_many([EnqueueRequest("resize", "hot", {}) for _ in range(40)])
        assert {future.result(5).partition for future in futures} == {7, 9}
        rows[0] = PlacementRecord("default", "hot", "pinned", None, (12,))
        book.invalidate()
        with pytest.raises(ConfigurationError, match="do not exist"):
            producer.enqueue("resize", tenant="hot", payload={})


def test_a_batch_sends_its_lane_jobs_to_one_partition_at_a_time(
    tmp_path: Path, kafka: FakeKafkaProducer
) -> None:
    """Drawn per job, a batch of a lane tenant's jobs was a few messages on every lane
    partition (one Kafka batch each, the broker's cost); now a run of LANE_BATCH_JOBS shares a
    partition, and a large batch still reaches every partition in turn."""
    kafka.partitions["unit.default.lane"] = 12
    rows = [PlacementRecord("default", "whale", "lane", None, None)]
    book = PlacementBook(lambda queue: rows, 5.0)
    with Producer(make_settings(tmp_path), placement_book=book, kafka_client=kafka) as producer:
        small = producer.enqueue_batch([EnqueueRequest("resize", "whale", {})] * 50).result(5)
        assert {ref.topic for ref in small} == {"unit.default.lane"}
        assert len({ref.partition for ref in small}) == 1
        large = producer.enqueue_batch([EnqueueRequest("resize", "whale", {})] * 800).result(5)
        partitions = [ref.partition for ref in large]
        runs = [partitions[i : i + LANE_BATCH_JOBS] for i in range(0, 800, LANE_BATCH_JOBS)]
        assert all(len(set(run)) == 1 for run in runs)
        # One partition after the other: every one of the 12 has its share of the 800.
        assert [run[0] for run in runs[1:]] == [(run[0] + 1) % 12 for run in runs[:-1]]
        assert set(partitions) == set(range(12))
        # Batches of their own draw their own first partition (a job id's random bits).
        firsts = {
            producer.enqueue_batch([EnqueueRequest("resize", "whale", {})]).result(5)[0].partition
            for _ in range(60)
        }
        assert len(firsts) > 6
        # Every lane job carries its tenant as its key, whatever its partition.
        assert {message["key"] for message in kafka.produced} == {b"whale"}


def test_latency_guard_rejects_past_the_budget(
    tmp_path: Path, kafka: FakeKafkaProducer, clock: FakeClock
) -> None:
    ages = {"default": 120.0}
    guard = LatencyGuard(60.0, ages.get, cache_seconds=5.0, clock=clock)
    book = PlacementBook(None, 5.0)
    settings = make_settings(tmp_path)
    with Producer(settings, placement_book=book, latency_guard=guard, kafka_client=kafka) as made:
        with pytest.raises(LatencyBudgetExceeded, match="120.0s old, the budget is 60s"):
            made.enqueue("resize", tenant="acme", payload={})
        ages["default"] = 10.0
        with pytest.raises(LatencyBudgetExceeded):  # still the cached age
            made.enqueue("resize", tenant="acme", payload={})
        clock.now += 5
        made.enqueue("resize", tenant="acme", payload={}).result(5)
    assert len(kafka.produced) == 1


def test_missing_topic_is_a_clear_error(tmp_path: Path, kafka: FakeKafkaProducer) -> None:
    del kafka.partitions["unit.default"]
    with Producer(
        make_settings(tmp_path), placement_book=PlacementBook(None, 1), kafka_client=kafka
    ) as made:
        with pytest.raises(ConfigurationError, match="tenantq topics ensure"):
            made.enqueue("resize", tenant="acme", payload={})


def test_close_fails_what_it_could_not_deliver(tmp_path: Path, kafka: FakeKafkaProducer) -> None:
    made = Producer(
        make_settings(tmp_path), placement_book=PlacementBook(None, 1), kafka_client=kafka
    )
    kafka.acknowledge = False
    future = made.enqueue("resize", tenant="acme", payload={})
    assert made.close(timeout=0.1) == 1
    with pytest.raises(EnqueueFailed) as raised:
        future.result(1)
    assert raised.value.possibly_persisted is False and raised.value.retriable is True
    with pytest.raises(EnqueueFailed, match="closed"):
        made.enqueue("resize", tenant="acme", payload={})


def test_context_manager_raises_when_jobs_were_lost(
    tmp_path: Path, kafka: FakeKafkaProducer
) -> None:
    kafka.acknowledge = False
    with pytest.raises(EnqueueFailed, match="1 jobs were not acknowledged"):
        with Producer(
            make_settings(tmp_path), placement_book=PlacementBook(None, 1), kafka_client=kafka
        ) as made:
            made.enqueue("resize", tenant="acme", payload={})


def test_enqueue_async(producer: Producer, kafka: FakeKafkaProducer) -> None:
    ref = asyncio.run(producer.enqueue_async("resize", tenant="acme", payload={"a": 1}))
    assert isinstance(ref, JobRef) and ref.topic == "unit.default"


def test_cyclic_payload_is_refused(producer: Producer, kafka: FakeKafkaProducer) -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(PayloadValidationError, match="not JSON-serialisable"):
        producer.enqueue("resize", tenant="acme", payload=cyclic)
    assert kafka.produced == []


def test_a_job_acknowledged_without_an_offset_is_sent_again(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    kafka.unconfirmed = {0}
    ref = producer.enqueue("resize", tenant="acme", payload={"n": 1}).result(5)
    first, again = kafka.produced
    assert again["value"] == first["value"] and again["headers"] == first["headers"]
    assert (again["topic"], again["partition"]) == (first["topic"], first["partition"])
    assert ref.offset == 1


def test_a_batch_job_acknowledged_without_an_offset_is_sent_again(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    kafka.unconfirmed = {1}
    requests = [EnqueueRequest("resize", "acme", {"n": n}) for n in range(3)]
    refs = producer.enqueue_batch(requests).result(5)
    assert [ref.offset for ref in refs] == [0, 3, 2]
    assert kafka.produced[3]["value"] == kafka.produced[1]["value"]


def test_a_job_never_acknowledged_with_an_offset_fails_as_possibly_persisted(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    kafka.unconfirmed = set(range(10))
    future = producer.enqueue("resize", tenant="acme", payload={})
    with pytest.raises(EnqueueFailed, match="without an offset 4 times") as raised:
        future.result(5)
    assert raised.value.possibly_persisted and raised.value.retriable
    assert len(kafka.produced) == 4
    batch = producer.enqueue_batch([EnqueueRequest("resize", "acme", {})])
    with pytest.raises(BatchEnqueueFailed) as failed:
        batch.result(5)
    assert failed.value.failures[0].possibly_persisted
    assert len(kafka.produced) == 8


class CountingKafka(FakeKafkaProducer):
    """Also counts its polls by thread, records whether a publication was under way at
    each produce, and says how many messages are in flight (``len``)."""

    def __init__(self) -> None:
        super().__init__()
        self.polls: dict[str, int] = {}
        self.produced_while_quiet: list[bool] = []
        self.watched: Producer | None = None

    def __len__(self) -> int:
        return len(self.pending)

    def poll(self, timeout: float) -> int:
        name = threading.current_thread().name
        self.polls[name] = self.polls.get(name, 0) + 1
        return super().poll(timeout)

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        if self.watched is not None:
            self.produced_while_quiet.append(self.watched._reports._quiet_until > time.monotonic())
        super().produce(topic, value, key, **options)


def test_the_delivery_thread_leaves_a_publication_its_reports(tmp_path: Path) -> None:
    kafka = CountingKafka()
    with Producer(
        make_settings(tmp_path), placement_book=PlacementBook(None, 5.0), kafka_client=kafka
    ) as producer:
        kafka.watched = producer
        kafka.acknowledge = False  # reports stay in flight
        futures = producer.enqueue_many([EnqueueRequest("resize", "acme", {})] * 3)
        # While it published, the delivery thread was told to keep away; after it, not for
        # long (PUBLISHING_GRACE_SECONDS).
        assert kafka.produced_while_quiet == [True, True, True]
        assert producer._reports._quiet_until < time.monotonic() + 0.01
        polls_before = kafka.polls.get("tenantq-producer-poll", 0)
        time.sleep(0.1)
        # In flight and no publication: it looks every millisecond (or so).
        assert kafka.polls.get("tenantq-producer-poll", 0) - polls_before >= 10
        assert not any(future.done() for future in futures)
        kafka.acknowledge = True
        assert [future.result(5).offset for future in futures] == [0, 1, 2]
        # Nothing in flight: it waits for the next publication (or 0.1 s).
        time.sleep(0.05)
        polls_before = kafka.polls.get("tenantq-producer-poll", 0)
        time.sleep(0.25)
        assert kafka.polls.get("tenantq-producer-poll", 0) - polls_before <= 6
        assert producer.enqueue("resize", tenant="acme", payload={}).result(5).offset == 3
        # A failed publication does not leave the delivery thread waiting.
        with pytest.raises(InvalidTenantId):
            producer.enqueue("resize", tenant="", payload={})
        assert producer._reports._quiet_until < time.monotonic() + 0.01


def test_a_publication_skips_serving_while_the_delivery_thread_has_its_turn(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    held = threading.Event()
    release = threading.Event()

    def hold_the_turn() -> None:
        with producer._reports._serving:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold_the_turn)
    holder.start()
    try:
        held.wait(5)
        started = time.monotonic()
        future = producer.enqueue("resize", tenant="acme", payload={})
        assert time.monotonic() - started < 1.0  # waited at most ENQUEUE_TURN_SECONDS
    finally:
        release.set()
        holder.join(5)
    assert future.result(5).offset == 0  # served by the delivery thread afterwards


def test_a_callback_may_enqueue_and_wait(producer: Producer, kafka: FakeKafkaProducer) -> None:
    # The turn to serve reports is reentrant: a done-callback, run while its thread serves
    # reports, may publish (which serves the reports ready) and wait for the result.
    inner: list[JobRef] = []
    threads: list[str] = []

    def enqueue_again(future: Any) -> None:
        threads.append(threading.current_thread().name)
        inner.append(producer.enqueue("resize", tenant="acme", payload={"n": 2}).result(5))

    kafka.acknowledge = False
    first = producer.enqueue("resize", tenant="acme", payload={"n": 1})
    first.add_done_callback(enqueue_again)
    kafka.acknowledge = True  # the delivery thread serves it, and runs the callback
    assert first.result(5).offset == 0
    deadline = time.monotonic() + 5
    while not inner and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [ref.offset for ref in inner] == [1]
    assert threads == ["tenantq-producer-poll"]


def numbered(count: int) -> list[EnqueueRequest]:
    return [EnqueueRequest("resize", "acme", {"n": n}) for n in range(count)]


def produced_numbers(kafka: FakeKafkaProducer) -> list[int]:
    return [
        decode_envelope(message["value"], max_bytes=10**6).payload_json()["n"]
        for message in kafka.produced
    ]


class RefusingKafka(FakeKafkaProducer):
    """Refuses the ``refuse``-th message produced with a client error, and answers the
    ``full``-th with a full buffer until ``room_after`` polls have been served."""

    def __init__(self, refuse: int | None = None, full: int | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.refuse, self.full = refuse, full
        self.room_after = 2

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        call, self.calls = self.calls, self.calls + 1
        if call == self.refuse:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))
        if call == self.full and self.room_after > 0:
            self.calls -= 1  # the same message again, after polls
            raise BufferError("Local: Queue full")
        super().produce(topic, value, key, **options)

    def poll(self, timeout: float) -> int:
        if self.room_after > 0 and self.calls == self.full:
            self.room_after -= 1
        return super().poll(timeout)


def test_a_message_refused_by_the_client_fails_alone(tmp_path: Path) -> None:
    kafka = RefusingKafka(refuse=2)
    with Producer(
        make_settings(tmp_path), placement_book=PlacementBook(None, 5.0), kafka_client=kafka
    ) as producer:
        futures = producer.enqueue_many(numbered(5))
        with pytest.raises(EnqueueFailed, match="refused by the client") as raised:
            futures[2].result(5)
        assert not raised.value.possibly_persisted and not raised.value.retriable
        assert produced_numbers(kafka) == [0, 1, 3, 4]
        assert [futures[n].result(5).offset for n in (0, 1, 3, 4)] == [0, 1, 2, 3]


def test_a_full_buffer_in_the_middle_is_waited_out(tmp_path: Path) -> None:
    kafka = RefusingKafka(full=3)
    settings = make_settings(tmp_path, producer={"buffer_timeout_seconds": 5})
    with Producer(settings, placement_book=PlacementBook(None, 5.0), kafka_client=kafka) as made:
        futures = made.enqueue_many(numbered(6))
        assert [future.result(5).offset for future in futures] == list(range(6))
        assert produced_numbers(kafka) == list(range(6))
        assert kafka.room_after == 0  # it waited, serving reports


def test_a_buffer_that_stays_full_fails_the_rest(tmp_path: Path) -> None:
    kafka = FakeKafkaProducer()
    settings = make_settings(tmp_path, producer={"buffer_timeout_seconds": 0.2})
    with Producer(settings, placement_book=PlacementBook(None, 5.0), kafka_client=kafka) as made:
        kafka.room = 2
        futures = made.enqueue_many(numbered(5))
        kafka.room = None
        assert [future.result(5).offset for future in futures[:2]] == [0, 1]
        for future in futures[2:]:
            with pytest.raises(QueueFull):
                future.result(5)


def test_a_held_up_publication_does_not_hold_up_earlier_reports(tmp_path: Path) -> None:
    # The delivery thread leaves the reports to a publishing thread for a short while only
    # (PUBLISHING_QUIET_SECONDS): here the second publication waits for its placements.
    release = threading.Event()

    def placements(queue: str) -> list[PlacementRecord]:
        if queue == "mail":
            release.wait(5)
        return []

    kafka = FakeKafkaProducer()
    book = PlacementBook(placements, 60.0)
    with Producer(make_settings(tmp_path), placement_book=book, kafka_client=kafka) as producer:
        kafka.acknowledge = False
        first = producer.enqueue("resize", tenant="acme", payload={})
        held = threading.Thread(
            target=lambda: producer.enqueue("resize", tenant="acme", payload={}, queue="mail")
        )
        held.start()
        try:
            time.sleep(0.05)
            kafka.acknowledge = True
            assert first.result(2).offset == 0
        finally:
            release.set()
            held.join(5)
