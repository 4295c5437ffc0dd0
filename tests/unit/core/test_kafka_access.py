"""A client the cluster refuses says so within a metadata slice, in one line naming the
cluster and never its password; a client the cluster answers gets its metadata; one that
hears nothing gives up at its timeout with the client's own error."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from tenantq.errors import ConfigurationError, KafkaAccessRefused
from tenantq.kafka_access import METADATA_SLICE_SECONDS, ClientReport, read_metadata

SASL_REFUSED = (
    "sasl_ssl://10.0.0.5:9093/bootstrap: SASL authentication error: Authentication failed "
    "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
)


class SilentCluster:
    """A client whose metadata requests time out; ``refuse_after`` requests in, the report
    hears of a refused login (as librdkafka's error event would tell it)."""

    def __init__(self, report: ClientReport, refuse_after: int | None = None) -> None:
        self.report = report
        self.refuse_after = refuse_after
        self.requests: list[float] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.requests.append(timeout)
        if self.refuse_after is not None and len(self.requests) > self.refuse_after:
            self.report.on_error(KafkaError(KafkaError._AUTHENTICATION, SASL_REFUSED))
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


def test_a_refused_login_ends_the_wait_at_the_next_slice() -> None:
    report = ClientReport("10.0.0.5:9093")
    client = SilentCluster(report, refuse_after=1)
    with pytest.raises(KafkaAccessRefused) as raised:
        read_metadata(client, report, timeout=60)
    assert len(client.requests) == 2
    assert all(timeout <= METADATA_SLICE_SECONDS for timeout in client.requests)
    line = str(raised.value)
    assert line.startswith("Kafka at 10.0.0.5:9093 refused tenantq's client: ")
    assert "SASL authentication error" in line and "TENANTQ_KAFKA_CONFIG" in line
    assert "\n" not in line
    assert isinstance(raised.value, ConfigurationError)


def test_silence_gives_up_at_the_timeout_with_the_clients_error() -> None:
    report = ClientReport("10.0.0.5:9093")
    client = SilentCluster(report)
    started = time.monotonic()
    with pytest.raises(KafkaException, match="transport failure"):
        read_metadata(client, report, timeout=1.2)
    # The fake fails at once: it is asked once a slice, not in a spin, until the timeout.
    assert 0.9 <= time.monotonic() - started < 3.0
    assert len(client.requests) == 3 and client.requests[-1] == pytest.approx(0.2, abs=0.1)


def test_stopping_ends_the_wait() -> None:
    report = ClientReport("10.0.0.5:9093")
    client = SilentCluster(report)
    with pytest.raises(KafkaException):
        read_metadata(client, report, timeout=60, stopping=lambda: True)
    assert len(client.requests) == 1


def test_an_answer_is_returned_and_poll_serves_the_events() -> None:
    report = ClientReport("10.0.0.5:9093")
    served: list[int] = []

    class Answering:
        def __init__(self) -> None:
            self.calls = 0

        def list_topics(self, topic: str | None = None, timeout: float = -1) -> str:
            self.calls += 1
            if self.calls == 1:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
            return f"metadata of {topic}"

    answer = read_metadata(
        Answering(), report, topic="q", timeout=10, poll=lambda: served.append(1)
    )
    assert answer == "metadata of q" and served == [1]


def test_only_refusals_count_as_refused() -> None:
    report = ClientReport("k:9092")
    report.on_error(KafkaError(KafkaError._TRANSPORT, "connection refused"))
    report.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert report.refusal() is None
    report.on_error(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed"))
    refusal = report.refusal()
    assert refusal is not None and "certificate verify failed" in str(refusal)
    assert "certificate verify failed" in report.describe("reading metadata")
