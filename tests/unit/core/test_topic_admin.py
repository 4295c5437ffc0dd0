"""Replication of declared topics: the cluster's when a queue declares none (three with
min.insync.replicas=2 on three brokers or more, else one per broker), the queue's when it
does."""

from __future__ import annotations

import pytest

from tenantq.settings import QueueSettings, Settings
from tenantq.topic_admin import TopicSpec, declared_topics, replication_drift, replication_for


@pytest.mark.parametrize(("brokers", "replicas"), [(0, 1), (1, 1), (2, 2), (3, 3), (5, 3)])
def test_replication_follows_the_broker_count_up_to_three(brokers: int, replicas: int) -> None:
    assert replication_for(brokers) == replicas


def test_three_replicas_come_with_two_in_sync() -> None:
    spec = TopicSpec("t", 12, None, {"max.message.bytes": "1"})
    on_three = spec.resolved(3)
    assert on_three.replication_factor == 3
    assert on_three.config == {"max.message.bytes": "1", "min.insync.replicas": "2"}
    on_one = spec.resolved(1)
    assert on_one.replication_factor == 1
    assert "min.insync.replicas" not in on_one.config


def test_a_declared_replication_factor_and_min_isr_win(tmp_path: object) -> None:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:1",
        queues={
            "default": QueueSettings(
                replication_factor=3, topic_config={"min.insync.replicas": "3"}
            ),
            "bulk": QueueSettings(),
        },
        dev_home=tmp_path,  # type: ignore[arg-type]
    )
    specs = {spec.name: spec for spec in declared_topics(settings)}
    fixed = specs["tenantq.default"].resolved(5)
    assert (fixed.replication_factor, fixed.config["min.insync.replicas"]) == (3, "3")
    assert specs["tenantq.bulk"].replication_factor is None
    assert specs["tenantq.bulk.dlq"].resolved(1).replication_factor == 1


def test_a_declared_factor_must_match_and_the_clusters_is_a_floor() -> None:
    assert replication_drift({3}, 3, 1) is None
    assert replication_drift({1}, 3, 3) == "replication factor [1], declared 3"
    assert replication_drift({3}, None, 3) is None
    # A broker down: two live brokers, topics made with three replicas are fine.
    assert replication_drift({3}, None, 2) is None
    # Made while one was down, seen once all three are back.
    assert replication_drift({2}, None, 3) == (
        "replication factor [2], the cluster's 3 brokers call for 3"
    )
    assert replication_drift(set(), None, 3) is None
