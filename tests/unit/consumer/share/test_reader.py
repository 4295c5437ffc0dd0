"""The share worker's reader: no poll while a record of the last one is open (the client
would refuse it) or while the worker may not claim; a fatal client error (a broker without
share groups) is said once, not logged forever."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException
from fakes import FakeClock, FakeMessage

from tenantq.consumer.share.reader import ShareReader
from tenantq.consumer.share.records import ShareRecords

TOPIC = "p.default"


class FakeShareConsumer:
    """Stands in for ``ShareConsumer.poll``: hands out the batches queued, or raises."""

    def __init__(self, *batches: list[Any]) -> None:
        self.batches = list(batches)
        self.polls = 0
        self.raises: Exception | None = None

    def poll(self, timeout: float) -> list[Any]:
        self.polls += 1
        if self.raises is not None:
            raise self.raises
        return self.batches.pop(0) if self.batches else []


def rig(
    consumer: FakeShareConsumer, *, may_read: bool = True
) -> tuple[ShareReader, ShareRecords, list[str]]:
    records = ShareRecords(lambda *args: None, 30.0, FakeClock())
    fatal: list[str] = []
    reader = ShareReader(
        consumer,  # type: ignore[arg-type]
        records,
        may_read=lambda: may_read,
        wait=lambda seconds: None,
        fatal=fatal.append,
    )
    return reader, records, fatal


def test_no_poll_while_the_last_polls_records_are_open() -> None:
    broken = FakeMessage(TOPIC, 0, 2, b"", error=KafkaError(KafkaError._BAD_MSG))
    consumer = FakeShareConsumer([FakeMessage(TOPIC, 0, 1, b"x"), broken], [])
    reader, records, _ = rig(consumer)
    assert [message.offset() for message in reader.read(0.1)] == [1]
    assert reader.read(0.1) == [] and consumer.polls == 1
    records.done(TOPIC, 0, 1, records.poll_number)
    assert reader.read(0.1) == [] and consumer.polls == 2


def test_no_poll_while_the_worker_may_not_claim() -> None:
    consumer = FakeShareConsumer([FakeMessage(TOPIC, 0, 1, b"x")])
    reader, _, _ = rig(consumer, may_read=False)
    assert reader.read(0.1) == [] and consumer.polls == 0


def test_a_fatal_client_error_is_handed_on_and_a_passing_one_is_not() -> None:
    consumer = FakeShareConsumer()
    reader, _, fatal = rig(consumer)
    consumer.raises = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    assert reader.read(0.1) == [] and fatal == []
    consumer.raises = KafkaException(
        KafkaError(
            KafkaError.UNSUPPORTED_VERSION,
            "ShareGroupHeartbeat fatal error: Broker: API version not supported",
            fatal=True,
        )
    )
    assert reader.read(0.1) == []
    assert fatal == ["ShareGroupHeartbeat fatal error: Broker: API version not supported"]
