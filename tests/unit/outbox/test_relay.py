"""The relay's publisher reports exactly the entries Kafka acknowledged, in order, and gives
up on the rest within its timeout (they stay in the outbox for the next round)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import fakes
from confluent_kafka import KafkaError

from tenantq.outbox.relay import EntryPublisher
from tenantq.settings import OutboxSettings
from tenantq.store.outbox import Entry


def entries(count: int) -> list[Entry]:
    return [
        Entry(
            id=index + 1,
            job_id=uuid.uuid4(),
            topic="unit.default",
            partition=index % 12,
            key=b"acme",
            value=f"envelope-{index}".encode(),
            headers=[("tenantq-job-id", "x")],
        )
        for index in range(count)
    ]


def publisher(tmp_path: Path, kafka: fakes.FakeKafkaProducer) -> EntryPublisher:
    settings = fakes.make_settings(tmp_path, outbox=OutboxSettings(publish_timeout_seconds=0.2))
    return EntryPublisher(settings, producer_factory=lambda config: kafka)


def test_every_acknowledged_entry_is_reported(tmp_path: Path) -> None:
    kafka = fakes.FakeKafkaProducer()
    batch = entries(5)
    assert sorted(publisher(tmp_path, kafka).publish(batch, lambda: False)) == [1, 2, 3, 4, 5]
    assert [message["partition"] for message in kafka.produced] == [0, 1, 2, 3, 4]
    assert [message["value"] for message in kafka.produced] == [e.value for e in batch]
    assert kafka.produced[0]["headers"] == [("tenantq-job-id", "x")]


def test_refused_entries_are_not_reported(tmp_path: Path) -> None:
    kafka = fakes.FakeKafkaProducer()
    kafka.fail[1] = KafkaError.NOT_ENOUGH_REPLICAS  # the second message's offset
    assert sorted(publisher(tmp_path, kafka).publish(entries(3), lambda: False)) == [1, 3]


def test_an_entry_acknowledged_without_an_offset_stays_for_the_next_round(
    tmp_path: Path,
) -> None:
    kafka = fakes.FakeKafkaProducer()
    kafka.unconfirmed = {0}
    assert sorted(publisher(tmp_path, kafka).publish(entries(2), lambda: False)) == [2]


def test_kafka_away_ends_the_round_within_the_timeout(tmp_path: Path) -> None:
    kafka = fakes.FakeKafkaProducer()
    kafka.acknowledge = False
    assert publisher(tmp_path, kafka).publish(entries(3), lambda: False) == []
    assert kafka.pending == []  # purged: this round's copies are not sent later


def test_a_refused_login_ends_the_round_at_once_and_says_why(tmp_path: Path) -> None:
    kafka = fakes.FakeKafkaProducer()
    kafka.acknowledge = False
    settings = fakes.make_settings(tmp_path, outbox=OutboxSettings(publish_timeout_seconds=30))
    configs: list[dict[str, object]] = []

    def factory(config: dict[str, object]) -> fakes.FakeKafkaProducer:
        configs.append(config)
        return kafka

    relay_publisher = EntryPublisher(settings, producer_factory=factory)
    # librdkafka's error event, as the client's poll would serve it
    error_cb = configs[0]["error_cb"]
    assert callable(error_cb)
    error_cb(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid"))
    started = time.monotonic()
    assert relay_publisher.publish(entries(3), lambda: False) == []
    assert time.monotonic() - started < 5  # not the 30 s publish timeout
    refusal = relay_publisher.client.refusal()
    assert refusal is not None and "SASL authentication error" in str(refusal)
