"""A tenant that floods the producer goes through a Kafka client of its own; the others stay
on the shared one; a tenant's jobs keep their order across a move (its jobs on the client it
leaves are delivered before the other client takes more)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClock, FakeKafkaProducer, make_settings

import tenantq
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.flood_meter import CALM_SECONDS, WINDOW_SECONDS
from tenantq.producer.producer import EnqueueRequest, Producer


class DeliveredByFlush(FakeKafkaProducer):
    """The shared client, whose messages wait until a flush: the test sees what waits."""

    def poll(self, timeout: float) -> int:
        return 0


class WatchedFloodClient(FakeKafkaProducer):
    """The flood client, noting how many messages the shared client still held undelivered
    each time it was handed one."""

    def __init__(self, shared: FakeKafkaProducer) -> None:
        super().__init__()
        self.shared = shared
        self.shared_pending_at_produce: list[int] = []

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        self.shared_pending_at_produce.append(len(self.shared.pending))
        super().produce(topic, value, key, **options)


@pytest.fixture
def shared() -> FakeKafkaProducer:
    return DeliveredByFlush()


@pytest.fixture
def flood(shared: FakeKafkaProducer) -> WatchedFloodClient:
    return WatchedFloodClient(shared)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


def producer_over(
    settings: tenantq.Settings,
    shared: FakeKafkaProducer,
    flood: WatchedFloodClient,
    clock: FakeClock,
) -> Producer:
    """A producer of ``settings`` over the two fake clients, its flood meter on ``clock``."""
    return Producer(
        settings,
        placement_book=PlacementBook(None, 5.0, clock),
        kafka_client=shared,
        flood_kafka_client=flood,
        clock=clock,
    )


@pytest.fixture
def producer(
    tmp_path: Path, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> Iterator[Producer]:
    with producer_over(make_settings(tmp_path), shared, flood, clock) as made:
        yield made


def requests(**per_tenant: int) -> list[EnqueueRequest]:
    return [
        EnqueueRequest("work", tenant, {"n": n})
        for tenant, count in per_tenant.items()
        for n in range(count)
    ]


def tenants_of(client: FakeKafkaProducer) -> list[bytes]:
    return [message["key"] for message in client.produced]


def numbers_of(client: FakeKafkaProducer, tenant: bytes) -> list[bytes]:
    return [m["value"] for m in client.produced if m["key"] == tenant]


def test_a_flooding_tenant_moves_to_its_own_client_after_its_earlier_jobs_are_delivered(
    producer: Producer, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> None:
    producer.enqueue_batch(requests(whale=300, cold=2))
    assert set(tenants_of(shared)) == {b"whale", b"cold"} and not flood.produced
    clock.now += 1.5 * WINDOW_SECONDS  # 300 jobs in 0.15 s: 2,000 jobs/s, 99% of the jobs
    producer.enqueue_batch(requests(whale=50, cold=3))
    assert tenants_of(flood) == [b"whale"] * 50
    assert tenants_of(shared)[-3:] == [b"cold"] * 3
    # The whale's 300 earlier jobs were delivered by the shared client before the flood
    # client took its first: Kafka cannot write them after the later ones.
    assert flood.shared_pending_at_produce[0] == 0
    assert producer.flush(1) == 0


def test_a_publication_of_both_kinds_of_tenant_is_split_and_every_future_resolves(
    producer: Producer, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> None:
    producer.enqueue_many(requests(whale=300))
    clock.now += 1.5 * WINDOW_SECONDS
    futures = producer.enqueue_many(
        [EnqueueRequest("work", tenant, {}) for tenant in ["a", "whale", "b", "whale", "a"]]
    )
    assert producer.flush(1) == 0
    refs = [future.result(1) for future in futures]
    assert len({ref.job_id for ref in refs}) == 5
    assert tenants_of(flood) == [b"whale", b"whale"]
    assert tenants_of(shared)[-3:] == [b"a", b"b", b"a"]


def test_a_tenant_that_stops_flooding_goes_back_after_a_calm_stretch(
    producer: Producer, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> None:
    producer.enqueue_batch(requests(whale=300))
    clock.now += 1.5 * WINDOW_SECONDS
    producer.enqueue_batch(requests(whale=300))
    assert len(flood.produced) == 300
    # A job a window: far under half the rate; it stays on its client for CALM_SECONDS.
    sent_to_flood = []
    for _ in range(int(CALM_SECONDS / WINDOW_SECONDS) + 5):
        clock.now += 1.5 * WINDOW_SECONDS
        before = len(flood.produced)
        producer.enqueue_batch(requests(whale=1))
        sent_to_flood.append(len(flood.produced) > before)
    assert sent_to_flood[0] and not sent_to_flood[-1]
    assert tenants_of(shared)[-1] == b"whale"


def test_an_even_bulk_of_many_tenants_stays_on_one_client(
    producer: Producer, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> None:
    for _ in range(5):
        producer.enqueue_batch(requests(**{f"tenant-{i}": 20 for i in range(50)}))
        clock.now += 1.5 * WINDOW_SECONDS
    assert len(shared.produced) == 5_000 and not flood.produced


def test_without_a_flood_rate_every_tenant_shares_one_client(
    tmp_path: Path, shared: FakeKafkaProducer, flood: WatchedFloodClient, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, producer={"flood_rate_per_second": None})
    with producer_over(settings, shared, flood, clock) as producer:
        producer.enqueue_batch(requests(whale=300))
        clock.now += 1.5 * WINDOW_SECONDS
        batch = producer.enqueue_batch(requests(whale=300))
        assert producer.flush(1) == 0
        assert len(batch.result(1)) == 300
    assert len(shared.produced) == 600 and not flood.produced
