"""``Producer.enqueue_batch`` without servers: one future per batch, the same validation as
``enqueue_many`` at the call site, per-job failure detail, and nothing lost on close. The batch
preparation fast path is in ``test_request.py``."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from fakes import FakeKafkaProducer, FakeMessage, make_settings

import tenantq
from tenantq import headers as header_names
from tenantq.errors import BatchEnqueueFailed, EnqueueFailed, InvalidTenantId, QueueFull
from tenantq.partitioner.murmur2 import default_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import BatchFuture, EnqueueRequest, JobRef, Producer
from tenantq.schemas.envelope import decode_envelope


@pytest.fixture
def kafka() -> FakeKafkaProducer:
    return FakeKafkaProducer()


@pytest.fixture
def producer(tmp_path: Path, kafka: FakeKafkaProducer) -> Iterator[Producer]:
    book = PlacementBook(None, 5.0)
    with Producer(make_settings(tmp_path), placement_book=book, kafka_client=kafka) as made:
        yield made


def requests(count: int, tenants: int = 3) -> list[EnqueueRequest]:
    return [EnqueueRequest("resize", f"t{n % tenants}", {"n": n}) for n in range(count)]


def test_one_future_resolves_to_every_ref_in_request_order(
    producer: Producer, kafka: FakeKafkaProducer
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


def test_an_empty_batch_is_resolved_at_once(producer: Producer, kafka: FakeKafkaProducer) -> None:
    assert list(producer.enqueue_batch([]).result(0)) == []
    assert kafka.produced == []


def test_validation_raises_at_the_call_site_and_publishes_nothing(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    bad: list[Any] = [*requests(5), {"job_type": "resize", "tenant": "bad tenant", "payload": {}}]
    with pytest.raises(InvalidTenantId) as raised:
        producer.enqueue_batch(bad)
    assert "request #5" in " ".join(raised.value.__notes__)
    with pytest.raises(tenantq.errors.InvalidJobError, match="job type"):
        producer.enqueue_batch([*requests(2), EnqueueRequest(["x"], "t", {})])  # type: ignore[arg-type]
    assert kafka.produced == []


def test_failures_are_reported_per_job_once_all_are_settled(
    producer: Producer, kafka: FakeKafkaProducer
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


def test_close_fails_the_undelivered_jobs_of_a_batch(
    tmp_path: Path, kafka: FakeKafkaProducer
) -> None:
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


def test_a_full_buffer_fails_the_rest_inside_the_result(
    tmp_path: Path, kafka: FakeKafkaProducer
) -> None:
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


def test_jobs_named_by_their_key_are_settled_from_the_start(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    outgoing = producer._preparer.prepare_all(requests(3), dt.datetime.now(dt.UTC))
    known = JobRef(uuid.uuid4(), "unit.default", 4, 17, False)
    batch = BatchFuture(outgoing, {1: known})
    assert not batch.done()
    for index in (0, 2):
        message = outgoing[index]
        batch.on_delivery(None, FakeMessage(message.topic, message.partition, index, message.value))
    refs = batch.result(0)
    assert refs[1] == known and not refs[1].created
    assert (
        refs[0].created and refs[2].created and [ref.created for ref in refs] == [True, False, True]
    )
    assert BatchFuture(outgoing[:1], {0: known}).result(0)[0] == known
