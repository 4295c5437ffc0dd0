"""Guarantee: a worker that gives partitions up in a rebalance stops exporting their lag, so
no series lingers at its last value on a member that no longer owns the partition (two
members would otherwise both report it, and the sum would double)."""

from __future__ import annotations

from typing import Any

from apps import APP
from support import running_worker, wait_for

import tenantq


def lag_partitions(worker: Any, topic: str) -> set[int]:
    registry = worker.observability.registry
    found = set()
    for family in registry.collect():
        if family.name == "tenantq_consumer_lag_messages":
            for sample in family.samples:
                if sample.labels["topic"] == topic:
                    found.add(int(sample.labels["partition"]))
    return found


def owned(worker: Any, topic: str) -> set[int]:
    return {p for (t, p) in worker.owned_partitions if t == topic}


def test_revoked_partitions_leave_the_lag_gauge(make_settings: Any) -> None:
    settings: tenantq.Settings = make_settings()
    main = f"{settings.topic_prefix}.default"
    with tenantq.Producer(settings) as producer:
        refs = [
            producer.enqueue("sleepy", tenant=f"t{i}", payload={}).result(30) for i in range(40)
        ]
    assert {ref.partition for ref in refs} == {0, 1, 2, 3}  # lag is known once a partition moved
    with running_worker(APP, settings) as first:
        wait_for(lambda: lag_partitions(first, main) == {0, 1, 2, 3}, timeout=60, what="all lag")
        with running_worker(APP, settings) as second:
            wait_for(
                lambda: owned(first, main) and owned(second, main) and len(owned(first, main)) < 4,
                timeout=60,
                what="a rebalance that splits the partitions",
            )
            wait_for(
                lambda: lag_partitions(first, main) == owned(first, main),
                timeout=30,
                what="the first member to report only what it owns",
            )
            assert lag_partitions(first, main) <= owned(first, main)
