"""``Producer.enqueue_batch`` without servers: one future per batch, the same validation as
``enqueue_many`` at the call site, per-job failure detail, and nothing lost on close. Also the
batch preparation fast path, which must publish byte for byte what the generic path does."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenantq
from confluent_kafka import KafkaError
from tenantq import headers as header_names
from tenantq.errors import BatchEnqueueFailed, EnqueueFailed, InvalidTenantId, QueueFull
from tenantq.job_ids import job_id_text, new_job_id, new_job_id_ints
from tenantq.partitioner.murmur2 import default_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import BatchFuture, EnqueueRequest, JobRef, Producer
from tenantq.schemas.envelope import decode_envelope
from tenantq.store.placement import PlacementRecord

TOPICS = {"unit.default": 12, **{f"unit.default.retry.{tier}": 3 for tier in range(4)}}


class Message:
    """What confluent-kafka hands to ``on_delivery``."""

    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value


class FakeKafka:
    """Records produced messages; delivers them (newest first, to not rely on order) on
    poll/flush, failing those whose index is in ``fail``."""

    def __init__(self) -> None:
        self.produced: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, Message]] = []
        self.fail: dict[int, int] = {}
        self.acknowledge = True
        self.room: int | None = None
        self.lock = threading.Lock()

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        with self.lock:
            if self.room is not None:
                if self.room == 0:
                    raise BufferError("Local: Queue full")
                self.room -= 1
            message = Message(topic, options["partition"], len(self.produced), bytes(value))
            self.produced.append({"topic": topic, "value": value, "key": key, **options})
            self.pending.append((options["on_delivery"], message))

    def _deliver(self) -> int:
        if not self.acknowledge:
            return len(self.pending)
        with self.lock:
            pending, self.pending = self.pending, []
        for callback, message in reversed(pending):
            code = self.fail.get(message.offset())
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

    def list_topics(self, topic: str, timeout: float) -> Any:
        from types import SimpleNamespace

        partitions = {index: None for index in range(TOPICS[topic])}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=partitions)})


def make_settings(tmp_path: Path, **overrides: Any) -> tenantq.Settings:
    fields: dict[str, Any] = {
        "kafka_bootstrap_servers": "127.0.0.1:1",
        "dev_home": tmp_path,
        "topic_prefix": "unit",
        "queues": {"default": {"partitions": 12, "retry_partitions": 3}},
    }
    fields.update(overrides)
    return tenantq.Settings(**fields)


@pytest.fixture
def kafka() -> FakeKafka:
    return FakeKafka()


@pytest.fixture
def producer(tmp_path: Path, kafka: FakeKafka) -> Iterator[Producer]:
    book = PlacementBook(None, 5.0)
    with Producer(make_settings(tmp_path), placement_book=book, kafka_client=kafka) as made:
        yield made


def requests(count: int, tenants: int = 3) -> list[EnqueueRequest]:
    return [EnqueueRequest("resize", f"t{n % tenants}", {"n": n}) for n in range(count)]


def test_one_future_resolves_to_every_ref_in_request_order(
    producer: Producer, kafka: FakeKafka
) -> None:
    batch = producer.enqueue_batch(requests(30))
    assert isinstance(batch, BatchFuture) and len(batch) == 30
    refs = batch.result(5)
    assert [ref.offset for ref in refs] == list(range(30))
    for n, (ref, message) in enumerate(zip(refs, kafka.produced, strict=True)):
        envelope = decode_envelope(message["value"], max_bytes=1_000_000)
        assert envelope.job_id == ref.job_id and ref.job_id.version == 7
        assert envelope.payload_json() == {"n": n}
        assert dict(message["headers"])[header_names.JOB_ID] == str(ref.job_id)
        assert ref == JobRef(ref.job_id, "unit.default", message["partition"], n)
        assert ref.partition == default_partition(f"t{n % 3}".encode(), 12)
    assert len({ref.job_id for ref in refs}) == 30
    assert refs[-1] == list(refs)[-1] and refs[2:4] == [refs[2], refs[3]] and refs == list(refs)


def test_an_empty_batch_is_resolved_at_once(producer: Producer, kafka: FakeKafka) -> None:
    assert list(producer.enqueue_batch([]).result(0)) == []
    assert kafka.produced == []


def test_validation_raises_at_the_call_site_and_publishes_nothing(
    producer: Producer, kafka: FakeKafka
) -> None:
    bad: list[Any] = [*requests(5), {"job_type": "resize", "tenant": "bad tenant", "payload": {}}]
    with pytest.raises(InvalidTenantId) as raised:
        producer.enqueue_batch(bad)
    assert "request #5" in " ".join(raised.value.__notes__)
    with pytest.raises(tenantq.errors.InvalidJobError, match="job type"):
        producer.enqueue_batch([*requests(2), EnqueueRequest(["x"], "t", {})])  # type: ignore[arg-type]
    assert kafka.produced == []


def test_failures_are_reported_per_job_once_all_are_settled(
    producer: Producer, kafka: FakeKafka
) -> None:
    kafka.fail = {3: KafkaError._MSG_TIMED_OUT, 7: KafkaError.MSG_SIZE_TOO_LARGE}
    batch = producer.enqueue_batch(requests(10))
    with pytest.raises(BatchEnqueueFailed) as raised:
        batch.result(5)
    error = raised.value
    assert sorted(error.failures) == [3, 7]
    assert error.failures[3].possibly_persisted and error.failures[3].retriable
    assert not error.failures[7].possibly_persisted
    assert error.possibly_persisted and not error.retriable
    assert "2 of 10 jobs" in str(error) and "request #3" in str(error)
    assert [ref is None for ref in error.refs] == [n in (3, 7) for n in range(10)]
    assert all(ref.offset == n for n, ref in enumerate(error.refs) if ref is not None)
    assert str(kafka.produced[3]["headers"][0][1]) in str(error.failures[3])


def test_close_fails_the_undelivered_jobs_of_a_batch(tmp_path: Path, kafka: FakeKafka) -> None:
    made = Producer(
        make_settings(tmp_path), placement_book=PlacementBook(None, 1), kafka_client=kafka
    )
    kafka.acknowledge = False
    batch = made.enqueue_batch(requests(4))
    assert not batch.done()
    assert made.close(timeout=0.1) == 4
    with pytest.raises(BatchEnqueueFailed) as raised:
        batch.result(1)
    assert sorted(raised.value.failures) == [0, 1, 2, 3] and raised.value.retriable
    with pytest.raises(EnqueueFailed, match="closed"):
        made.enqueue_batch(requests(1))


def test_a_full_buffer_fails_the_rest_inside_the_result(tmp_path: Path, kafka: FakeKafka) -> None:
    settings = make_settings(tmp_path, producer={"buffer_timeout_seconds": 0.1})
    with Producer(settings, placement_book=PlacementBook(None, 1), kafka_client=kafka) as made:
        kafka.acknowledge = False
        kafka.room = 0
        with pytest.raises(QueueFull):
            made.enqueue_batch(requests(3))
        kafka.room = 2
        batch = made.enqueue_batch(requests(5))
        kafka.acknowledge = True
        with pytest.raises(BatchEnqueueFailed) as raised:
            batch.result(5)
        assert sorted(raised.value.failures) == [2, 3, 4]
        assert not raised.value.possibly_persisted and raised.value.retriable
        assert [ref is not None for ref in raised.value.refs] == [True, True, False, False, False]


def test_the_same_explicit_job_twice_in_a_batch(producer: Producer) -> None:
    job_id = uuid.uuid4()
    same = EnqueueRequest("resize", "t", {"n": 1}, job_id=job_id)
    refs = producer.enqueue_batch([same, same, EnqueueRequest("resize", "t", {})]).result(5)
    assert [ref.job_id for ref in refs[:2]] == [job_id, job_id]
    assert sorted(ref.offset for ref in refs) == [0, 1, 2]


def test_batch_fast_path_publishes_what_the_generic_path_does(tmp_path: Path) -> None:
    rows = [PlacementRecord("default", "spready", "spread", 4, ())]
    with Producer(
        make_settings(tmp_path),
        placement_book=PlacementBook(lambda queue: rows, 5.0),
        kafka_client=FakeKafka(),
    ) as made:
        preparer = made._preparer
        now = dt.datetime.now(dt.UTC)
        mixed: list[Any] = [
            EnqueueRequest("resize", "acme", {"a": [1, "é"]}, job_id=uuid.uuid4()),
            EnqueueRequest("resize", "spready", {"n": 2}, job_id=str(uuid.uuid4())),
            {"job_type": "resize", "tenant": "acme", "payload": None, "job_id": uuid.uuid4()},
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), delay=30),
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), max_attempts=2),
        ]
        batched = preparer.prepare_all(mixed, now)
        one_by_one = [preparer.prepare(request, now) for request in mixed]
        assert batched == one_by_one
        assert batched[3].topic.startswith("unit.default.retry.")
        assert dict(batched[3].extra_headers)[header_names.DELAY_REASON] == "scheduled"


def test_job_ids_are_fresh_uuid7s() -> None:
    ints = new_job_id_ints(500)
    assert len(set(ints)) == 500
    for value in ints:
        made = uuid.UUID(int=value)
        assert made.version == 7 and made.variant == uuid.RFC_4122
        assert job_id_text(value) == str(made)
    assert new_job_id().version == 7
    millis = int(time.time() * 1000)
    assert abs((ints[0] >> 80) - millis) < 5_000
