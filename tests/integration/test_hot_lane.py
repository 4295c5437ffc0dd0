"""Guarantee: a tenant that floods a partition is moved to its queue's hot lane — its waiting
jobs go to the lane topic, the tenants sharing its partition stop waiting behind it — and it
comes back once the lane is drained; on the way no job is lost or run twice."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from support import all_in, counting_app, flood, hot_lane_settings, running_worker, wait_for

import tenantq
from tenantq.consumer.lane_keeper import LaneKeeper
from tenantq.partitioner.placement import key_partition


def lane_rows(db: psycopg.Connection[Any], tenant: str) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT mode, automatic, reason FROM tenantq_tenant_placement "
        "WHERE tenant_id = %s AND mode = 'lane'",
        (tenant,),
    ).fetchall()


def test_a_flooding_tenant_goes_to_the_lane_and_comes_back(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = hot_lane_settings(make_settings, 2.0)
    whale = f"whale-{uuid.uuid4().hex[:6]}"
    # Cold tenants that hash to the whale's partition: the ones it would hold up.
    cold = [f"cold{n}" for n in range(200)]
    cold = [t for t in cold if key_partition(t, 2) == key_partition(whale, 2)][:5]
    app, runs = counting_app(settings, "work", seconds=0.01)

    with tenantq.Producer(settings, app) as producer:
        flooded, quiet = flood(producer, whale, 600, cold)
    keeper = LaneKeeper(settings, ["default"])
    keeper.start()
    try:
        with running_worker(app, settings, concurrency=4) as worker:
            wait_for(lambda: bool(lane_rows(db, whale)), timeout=60, what="the whale in the lane")
            ((mode, automatic, reason),) = lane_rows(db, whale)
            assert mode == "lane" and automatic and "unfinished messages" in reason
            wait_for(lambda: all_in(db, quiet, {"succeeded"}), timeout=60, what="cold jobs")
            # While the whale's backlog is still in the lane, new whale jobs go there too.
            with tenantq.Producer(settings, app) as producer:
                late = producer.enqueue("work", tenant=whale, payload={}).result(30)
            assert late.topic == f"{settings.topic_prefix}.default.lane"
            everything = [*flooded, *quiet, late.job_id]
            wait_for(lambda: all_in(db, everything, {"succeeded"}), timeout=120, what="all done")
            wait_for(lambda: not lane_rows(db, whale), timeout=60, what="the whale back")
            diverted = worker.observability.registry.get_sample_value(
                "tenantq_lane_diverted_total", {"queue": "default"}
            )
            assert diverted and diverted > 0
    finally:
        keeper.stop(10)
    assert set(runs) == set(everything)
    assert all(count == 1 for count in runs.values()), [c for c in runs.values() if c != 1]
    with tenantq.Producer(settings, app) as producer:
        back = producer.enqueue("work", tenant=whale, payload={}).result(30)
    assert back.topic == f"{settings.topic_prefix}.default"
