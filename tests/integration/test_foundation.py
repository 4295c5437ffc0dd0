"""Foundation: the real broker carries messages, the real database enforces the job
invariants, migrations build exactly the declared schema, and topic drift is an error."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from confluent_kafka import Consumer, Producer

import tenantq
from tenantq.errors import TopicDriftError
from tenantq.settings import QueueSettings
from tenantq.store.engine import create_sqlalchemy_engine
from tenantq.store.models import metadata
from tenantq.topic_admin import ensure_topics
from tenantq.topics import QueueTopics


def test_produce_and_consume_through_the_real_broker(settings: tenantq.Settings) -> None:
    topic = QueueTopics.of(settings.topic_prefix, "default", 3).main
    producer = Producer(settings.kafka_client_config(**{"enable.idempotence": True}))
    sent = {f"m{i}".encode() for i in range(20)}
    for i, value in enumerate(sorted(sent)):
        producer.produce(topic, value=value, partition=i % 4)
    assert producer.flush(30) == 0
    consumer = Consumer(
        settings.kafka_client_config(
            **{"group.id": f"g{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
        )
    )
    consumer.subscribe([topic])
    received: set[bytes] = set()
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.add(message.value())
            if received == sent:
                break
    finally:
        consumer.close()
    assert received == sent


def _insert_job(db: psycopg.Connection[Any], **columns: Any) -> None:
    values = {
        "id": uuid.uuid4(),
        "deployment": "foundation",
        "queue": "default",
        "job_type": "noop",
        "tenant_id": "acme",
        "partition_key": "acme",
        "state": "runnable",
        "max_attempts": 3,
    }
    values.update(columns)
    names = ", ".join(values)
    placeholders = ", ".join(f"%({name})s" for name in values)
    db.execute(f"INSERT INTO tenantq_jobs ({names}) VALUES ({placeholders})", values)  # noqa: S608


def test_database_round_trip(db: psycopg.Connection[Any]) -> None:
    job_id = uuid.uuid4()
    _insert_job(db, id=job_id, progress=psycopg.types.json.Jsonb({"page": 3}))
    row = db.execute(
        "SELECT state, attempts, progress, finished_at FROM tenantq_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("runnable", 0, {"page": 3}, None)


@pytest.mark.parametrize(
    "columns, constraint",
    [
        ({"state": "succeeded"}, "finished_exactly_when_terminal"),
        ({"state": "runnable", "finished_at": "now()"}, "finished_exactly_when_terminal"),
        ({"state": "leased"}, "lease_exactly_when_leased"),
        ({"lease_owner": "w1", "lease_until": "2030-01-01"}, "lease_exactly_when_leased"),
        ({"max_attempts": 0}, "max_attempts_positive"),
        ({"tenant_id": ""}, "tenant_id_length"),
        ({"state": "sleeping"}, "job_state"),
    ],
)
def test_constraints_refuse_impossible_jobs(
    db: psycopg.Connection[Any], columns: dict[str, Any], constraint: str
) -> None:
    with pytest.raises(psycopg.errors.DatabaseError) as raised:
        _insert_job(db, **columns)
    assert constraint in str(raised.value)


def test_idempotency_key_unique_per_deployment_and_queue(db: psycopg.Connection[Any]) -> None:
    key = f"k-{uuid.uuid4()}"
    _insert_job(db, idempotency_key=key)
    _insert_job(db, idempotency_key=key, queue="other")
    _insert_job(db, idempotency_key=key, deployment="another")
    with pytest.raises(psycopg.errors.UniqueViolation):
        _insert_job(db, idempotency_key=key)


def test_a_job_row_names_its_deployment(db: psycopg.Connection[Any]) -> None:
    """No default: a statement that forgets the deployment is refused, it never lands in
    someone else's namespace."""
    with pytest.raises(psycopg.errors.NotNullViolation):
        _insert_job(db, deployment=None)


def test_migrations_build_exactly_the_models(database_url: str) -> None:
    engine = create_sqlalchemy_engine(tenantq.Settings(database_url=database_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "version_table": "tenantq_alembic_version",
                    # Only tenantq's tables: the test session adds its own.
                    "include_name": lambda name, kind, _parent: (
                        kind != "table" or name.startswith("tenantq_")
                    ),
                },
            )
            differences = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_topics_ensure_is_idempotent_and_reports_drift(
    make_settings: Any,
) -> None:
    settings = make_settings()
    report = ensure_topics(settings)
    assert report.created == []
    assert len(report.existing) == 6  # main, hot lane, three retry tiers, dlq
    grown = settings.model_copy(
        update={
            "queues": {
                "default": QueueSettings(partitions=8, retry_delays_seconds=(1.0, 3.0, 10.0))
            }
        }
    )
    with pytest.raises(TopicDriftError, match="4 partitions, declared 8"):
        ensure_topics(grown)
