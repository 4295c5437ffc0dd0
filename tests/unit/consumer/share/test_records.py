"""The share worker's record book: a poll's records stay open until each job reaches a durable
state (ACCEPT) or is given back (RELEASE); the next poll waits for that, or for the lock to
run out; an acknowledgement for a poll left behind is never sent."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError
from fakes import FakeClock, FakeMessage, FakePublisher, RecordingEvents, work_item

import tenantq
from tenantq.consumer.intake import Intake
from tenantq.consumer.share.records import ShareRecords
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import WorkItem
from tenantq.schemas.envelope import Envelope, encode_envelope

TOPIC = "p.default"


class Acknowledged:
    """Stands in for ``ShareConsumer.acknowledge_offset``: records each call; ``refuse`` makes
    it raise as the client does for a record it no longer holds."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, AcknowledgeType]] = []
        self.refuse = False

    def __call__(self, topic: str, partition: int, offset: int, kind: AcknowledgeType) -> None:
        if self.refuse:
            raise RuntimeError("offset is not in-flight")  # IllegalStateException's base
        self.calls.append((topic, partition, offset, kind))


def envelope_bytes(tenant: str = "acme") -> bytes:
    now = dt.datetime.now(dt.UTC)
    return encode_envelope(Envelope(uuid.uuid4(), "default", "t", tenant, tenant, b"{}", now))


def records_of(*offsets: int, delivery_count: int = 1) -> list[Any]:
    return [
        FakeMessage(TOPIC, 0, offset, envelope_bytes(), delivery_count=delivery_count)
        for offset in offsets
    ]


def book(lock_seconds: float = 30.0) -> tuple[ShareRecords, Acknowledged, FakeClock]:
    acknowledged, clock = Acknowledged(), FakeClock(100.0)
    return ShareRecords(acknowledged, lock_seconds, clock), acknowledged, clock


def test_the_next_poll_waits_until_every_record_is_accepted() -> None:
    records, acknowledged, _ = book()
    records.acquired(records_of(5, 6))
    epoch = records.take(TOPIC, 0, 5)
    assert epoch == 1 and records.take(TOPIC, 0, 6) == 1
    records.done(TOPIC, 0, 5, epoch)
    assert not records.settled()
    assert acknowledged.calls == [(TOPIC, 0, 5, AcknowledgeType.ACCEPT)]
    records.done(TOPIC, 0, 6, epoch)
    assert records.settled() and records.open == 0
    assert records.counts["accepted"] == 2


def test_a_record_given_back_is_released_and_an_unknown_one_is_not_taken() -> None:
    records, acknowledged, _ = book()
    records.acquired(records_of(7))
    assert records.take(TOPIC, 0, 8) == 0  # not acquired by this member: dropped by the intake
    item = work_item(offset=7)
    item.record.epoch = records.take(TOPIC, 0, 7)
    records.release_items([item])
    assert acknowledged.calls == [(TOPIC, 0, 7, AcknowledgeType.RELEASE)]
    assert records.settled()


def test_records_still_open_when_the_lock_runs_out_go_back_and_a_late_result_sends_nothing() -> (
    None
):
    records, acknowledged, clock = book(lock_seconds=30.0)
    records.acquired(records_of(1, 2))
    records.done(TOPIC, 0, 1, 1)
    clock.now += 29.9
    assert not records.settled()
    clock.now += 0.2
    assert records.settled()  # the broker has record 2 back: the next poll may go
    assert acknowledged.calls[-1] == (TOPIC, 0, 2, AcknowledgeType.RELEASE)
    assert records.counts["expired"] == 1
    records.acquired(records_of(3))
    records.done(TOPIC, 0, 2, 1)  # the job of the released record finished here after all
    assert len(acknowledged.calls) == 2 and records.counts["late"] == 1
    assert not records.current(TOPIC, 0, 1) and records.current(TOPIC, 0, 2)


def test_records_with_an_error_were_acknowledged_by_the_client_and_redeliveries_are_counted() -> (
    None
):
    records, _, _ = book()
    broken = FakeMessage(TOPIC, 0, 9, b"", error=KafkaError(KafkaError._BAD_MSG))
    records.acquired([broken, *records_of(10, delivery_count=3)])
    assert records.open == 1 and records.take(TOPIC, 0, 9) == 0
    assert records.counts["received"] == 1 and records.counts["redelivered"] == 1


def test_an_acknowledgement_the_client_refuses_is_counted_not_raised() -> None:
    records, acknowledged, _ = book()
    records.acquired(records_of(4))
    acknowledged.refuse = True
    records.done(TOPIC, 0, 4, 1)
    assert records.settled() and records.counts["late"] == 1


def test_release_open_gives_every_open_record_back() -> None:
    records, acknowledged, _ = book()
    records.acquired(records_of(2, 1))
    records.release_open()
    assert [call[2:] for call in acknowledged.calls] == [
        (1, AcknowledgeType.RELEASE),
        (2, AcknowledgeType.RELEASE),
    ]
    assert records.settled()


def test_the_worker_intake_reads_share_records_and_a_dead_letter_accepts_its_record() -> None:
    """The consumer-group worker's own ``Intake`` over the record book: a readable record
    becomes work of the poll it came in; an unreadable one goes to the DLQ and, once Kafka
    holds the copy, is accepted (the DLQ is tenantq's, not the broker's)."""
    records, acknowledged, _ = book()
    admitted: list[WorkItem] = []
    publisher = FakePublisher()
    intake = Intake(
        settings=tenantq.Settings(),
        topics=TopicMap.of(tenantq.Settings(topic_prefix="p"), ["default"]),
        worker_id="share-member",
        partitions=records,
        consumer=object(),
        publisher=publisher,
        events=RecordingEvents(),
        in_lane=lambda queue, tenant: False,
        find_type=lambda name: None,
        admit=admitted.append,
    )
    good, bad = FakeMessage(TOPIC, 0, 11, envelope_bytes()), FakeMessage(TOPIC, 0, 12, b"junk")
    records.acquired([good, bad])
    intake.take([good, bad])  # type: ignore[list-item]
    assert [(item.offset, item.record.epoch) for item in admitted] == [(11, 1)]
    assert [message.topic for message in publisher.published] == ["p.default.dlq"]
    assert acknowledged.calls == [(TOPIC, 0, 12, AcknowledgeType.ACCEPT)]
    assert records.open == 1
