"""The worker's publisher sends without waiting: a batch's acknowledgements come back through
``serve`` on the caller's thread, never from inside another ``publish``, and a delivery with
no offset counts as not acknowledged."""

from __future__ import annotations

from typing import Any

from fakes import FakeKafkaProducer

from tenantq import Settings
from tenantq.producer.publisher import Outgoing, Publisher


def publisher(kafka: FakeKafkaProducer) -> Publisher:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:1", database_url="postgresql://u@127.0.0.1/x"
    )
    return Publisher(settings, "test", producer_factory=lambda config: kafka)


def messages(count: int) -> list[Outgoing]:
    return [Outgoing("p.default.lane", b"k", b"v%d" % i, [], i % 2) for i in range(count)]


def test_send_hands_the_acknowledgements_back_on_serve_only() -> None:
    kafka = FakeKafkaProducer({"p.default.lane": 2})
    sent = publisher(kafka)
    answers: list[list[bool]] = []
    sent.send(messages(3), answers.append)
    assert len(kafka.produced) == 3 and sent.sending == 3 and answers == []
    # A synchronous publish meanwhile delivers every report, and still answers nobody else.
    assert sent.publish(messages(1)) == [True]
    assert answers == []
    sent.serve()
    assert answers == [[True, True, True]] and sent.sending == 0
    sent.serve()
    assert answers == [[True, True, True]]


def test_a_delivery_without_offset_is_not_acknowledged() -> None:
    kafka = FakeKafkaProducer({"p.default.lane": 2})
    kafka.unconfirmed = {1}
    kafka.fail = {2: -195}  # transport error
    sent = publisher(kafka)
    answers: list[list[bool]] = []
    sent.send(messages(4), answers.append)
    sent.serve()
    assert answers == [[True, False, False, True]]


def test_nothing_settled_nothing_answered_until_settle() -> None:
    kafka = FakeKafkaProducer({"p.default.lane": 2})
    kafka.acknowledge = False
    sent = publisher(kafka)
    answers: list[Any] = []
    sent.send(messages(2), answers.append)
    sent.serve()
    assert answers == [] and sent.sending == 2
    kafka.acknowledge = True
    sent.settle(1.0)
    assert answers == [[True, True]] and sent.sending == 0
