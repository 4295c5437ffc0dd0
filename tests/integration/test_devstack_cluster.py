"""Guarantee: `tenantq dev up --brokers 3` runs a KRaft cluster of three combined nodes;
topics get three replicas with min.insync.replicas=2; jobs are produced and run through it,
also while one broker is down; `dev up` again starts only the node that is missing, and
`dev status --json` names every node with its pid."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from topology_stack import TopologyStack, run_jobs, topology_stack

from tenantq.topic_admin import declared_topics, ensure_topics

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]


@pytest.fixture(scope="module")
def cluster() -> Iterator[TopologyStack]:
    with topology_stack(brokers=3) as stack:
        yield stack


def test_three_brokers_each_a_broker_and_a_controller(cluster: TopologyStack) -> None:
    processes = cluster.processes()
    brokers = [p for p in processes if p["server"] == "kafka"]
    assert [b["node_id"] for b in brokers] == [1, 2, 3]
    assert {b["role"] for b in brokers} == {"broker+controller"}
    assert all(b["healthy"] and b["running"] for b in brokers), brokers
    assert len({b["pid"] for b in brokers}) == 3
    assert len({b["endpoint"] for b in brokers} | {b["controller_endpoint"] for b in brokers}) == 6
    assert cluster.state["kafka_bootstrap_servers"] == ",".join(b["endpoint"] for b in brokers)
    assert [(p["server"], p["role"]) for p in processes if p["server"] == "postgres"] == [
        ("postgres", "primary")
    ]
    print(f"three brokers and Postgres up in {cluster.timings}")


def test_topics_are_replicated_three_times_with_two_in_sync(cluster: TopologyStack) -> None:
    with cluster.settings("cluster") as settings:
        run_jobs(settings, 10)
        admin = AdminClient(settings.kafka_client_config())
        names = [spec.name for spec in declared_topics(settings)]
        metadata = admin.list_topics(timeout=30)
        for name in names:
            partitions = metadata.topics[name].partitions.values()
            assert {len(p.replicas) for p in partitions} == {3}, name
            assert {len(p.isrs) for p in partitions} == {3}, name
        resources = [ConfigResource("topic", name) for name in names]
        for future in admin.describe_configs(resources).values():
            assert future.result()["min.insync.replicas"].value == "2"
        offsets = metadata.topics["__consumer_offsets"].partitions.values()
        assert {len(p.replicas) for p in offsets} == {3}


def test_jobs_run_with_a_broker_down_and_up_starts_only_that_broker(
    cluster: TopologyStack,
) -> None:
    before = {p["node"]: p["pid"] for p in cluster.processes() if p["server"] == "kafka"}
    with cluster.settings("onedown") as settings:
        ensure_topics(settings)
        cluster.kill(before["3"])
        down = cluster.process("kafka", "3")
        assert (down["running"], down["healthy"], down["pid"]) == (False, False, None)
        # Two replicas in sync of three: acks=all writes still succeed, and ensuring the
        # topics again is no drift while the third broker is away.
        runs = run_jobs(settings, 20, timeout=180)
        assert set(runs.values()) == {1}
    seconds = cluster.up()
    after = {p["node"]: p for p in cluster.processes() if p["server"] == "kafka"}
    assert after["1"]["pid"] == before["1"] and after["2"]["pid"] == before["2"]
    assert after["3"]["pid"] not in (None, before["3"]) and after["3"]["healthy"]
    print(f"dev up restarted broker 3 in {seconds:.1f}s")
    started = time.monotonic()
    again = cluster.up()
    assert {p["node"]: p["pid"] for p in cluster.processes() if p["server"] == "kafka"} == {
        node: process["pid"] for node, process in after.items()
    }
    assert again < 30, f"an idempotent dev up took {time.monotonic() - started:.1f}s"
