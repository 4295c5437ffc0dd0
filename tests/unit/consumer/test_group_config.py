"""The worker's consumer settings: the defaults that keep every tenant's messages moving, the
user's librdkafka keys over them, and what correctness needs over both."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from tenantq import Settings
from tenantq.consumer.group_config import consumer_config


def settings(**kafka_config: str) -> Settings:
    return Settings(
        kafka_bootstrap_servers="127.0.0.1:1",
        database_url="postgresql://u@127.0.0.1/x",
        kafka_config=kafka_config,
    )


def test_a_fetch_carries_a_bounded_slice_of_each_partition() -> None:
    config = consumer_config(settings(), "g", "w")
    assert config["max.partition.fetch.bytes"] == 64 * 1024
    assert config["fetch.wait.max.ms"] == 50


def test_librdkafka_fetches_ahead_about_one_read_ahead_window() -> None:
    config = consumer_config(settings(), "g", "w")
    assert config["queued.min.messages"] == 1_000 == Settings().worker.read_ahead_per_partition
    assert config["fetch.queue.backoff.ms"] == 5
    wider = Settings(
        kafka_bootstrap_servers="127.0.0.1:1",
        database_url="postgresql://u@127.0.0.1/x",
        worker={"read_ahead_per_partition": 5_000},
    )
    assert consumer_config(wider, "g", "w")["queued.min.messages"] == 5_000


def test_the_users_keys_win_over_the_defaults_but_not_over_correctness(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before, a key of both (here enable.auto.offset.store) stopped the worker with a TypeError.
    config = consumer_config(
        settings(**{"max.partition.fetch.bytes": "1048576", "enable.auto.offset.store": "true"}),
        "g",
        "w",
    )
    assert config["max.partition.fetch.bytes"] == "1048576"
    assert config["enable.auto.offset.store"] is False
    assert "ignoring enable.auto.offset.store in kafka_config" in caplog.text


def test_a_classic_session_fits_in_the_poll_interval_the_user_chose() -> None:
    def classic(**kafka_config: str) -> dict[str, object]:
        made = settings(**kafka_config)
        made.worker.group_protocol = "classic"
        return consumer_config(made, "g", "w")

    assert classic()["session.timeout.ms"] == 10000
    short = classic(**{"max.poll.interval.ms": "7000"})
    assert short["session.timeout.ms"] == 7000 and short["heartbeat.interval.ms"] == 1000
    # librdkafka makes the consumer (it refuses max.poll.interval.ms < session.timeout.ms).
    Consumer(short).close()
    assert classic(**{"session.timeout.ms": "6000"})["session.timeout.ms"] == "6000"
