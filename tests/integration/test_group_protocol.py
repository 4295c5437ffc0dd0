"""Guarantee: a worker's consumer group speaks the protocol its settings name, and the broker
agrees: ``consumer`` (KIP-848, the default, Kafka 4.0+) or ``classic`` (cooperative-sticky,
the one a 3.9 broker offers; ``make test-kafka39`` runs the core guarantees so). The broker
describes the group with that type, the worker as its one member holding every partition
of the queue's topics, and the jobs run."""

from __future__ import annotations

from typing import Any

import psycopg
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from support import all_in, counting_app, running_worker, wait_for

import tenantq


def test_the_group_speaks_the_protocol_the_settings_name(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app, ran = counting_app(settings, "noop")
    with tenantq.Producer(settings, app) as producer:
        futures = [producer.enqueue("noop", tenant=f"t{i}", payload={}) for i in range(8)]
        job_ids = [future.result(30).job_id for future in futures]
    expected = (
        ConsumerGroupType.CLASSIC
        if settings.worker.group_protocol == "classic"
        else ConsumerGroupType.CONSUMER
    )
    admin = AdminClient(settings.kafka_client_config())
    with running_worker(app, settings) as worker:
        wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=60, what="jobs ran")
        future = admin.describe_consumer_groups([worker.group_id])[worker.group_id]
        group = future.result(timeout=30)
        assert group.type == expected, (group.type, settings.worker.group_protocol)
        (member,) = group.members
        assigned = {(p.topic, p.partition) for p in member.assignment.topic_partitions}
        main = f"{settings.topic_prefix}.default"
        assert {(main, p) for p in range(settings.queue("default").partitions)} <= assigned
    assert sorted(ran.values()) == [1] * len(job_ids)
