"""The share group's names and configuration: a group id apart from the consumer group's,
explicit acknowledgement, and a group that starts from the earliest record."""

from __future__ import annotations

from tenantq.consumer.share.group import (
    ShareGroupOptions,
    group_configs,
    share_consumer_config,
    share_group,
)
from tenantq.settings import Settings
from tenantq.topics import consumer_group


def test_the_share_group_is_not_the_consumer_group() -> None:
    assert share_group("p", ["b", "a"]) == "p.a+b.share-workers"
    assert share_group("p", ["a"]) != consumer_group("p", "a")


def test_a_new_group_reads_from_the_earliest_record_and_sets_only_what_was_asked() -> None:
    assert group_configs(ShareGroupOptions()) == {"share.auto.offset.reset": "earliest"}
    assert group_configs(ShareGroupOptions(lock_seconds=2.5, delivery_limit=3)) == {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "2500",
        "share.delivery.count.limit": "3",
    }
    assert ShareGroupOptions().lock == 30.0 and ShareGroupOptions(lock_seconds=4).lock == 4


def test_acknowledgement_is_explicit_whatever_the_user_passes() -> None:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:1",
        kafka_config={"share.acknowledgement.mode": "implicit", "socket.timeout.ms": "5000"},
    )
    config = share_consumer_config(settings, "g", "w1", 64)
    assert config["share.acknowledgement.mode"] == "explicit"
    assert config["socket.timeout.ms"] == "5000"
    assert (config["group.id"], config["client.id"], config["max.poll.records"]) == (
        "g",
        "tenantq-w1",
        64,
    )
