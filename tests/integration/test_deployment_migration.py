"""Guarantee: the migration that makes deployments namespaces gives every existing row the
deployment it belongs to (a job the prefix of its topic, an outbox entry its job's, a worker
that of the jobs it holds, a schedule or an audit row that of its job, a placement a copy for
every deployment with jobs in its queue, and the default prefix where nothing says), and its
downgrade merges the namespaces back into the previous schema, one row per name."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from support import migrate_to

from tenantq.store.engine import psycopg_url

BEFORE = "0009"
AFTER = "0010"


@pytest.fixture
def database(fresh_database: str) -> str:
    """A database at the revision before deployments (the head's downgrade, on no rows)."""
    migrate_to(fresh_database, BEFORE, down=True)
    return fresh_database


JOB = """
INSERT INTO tenantq_jobs (id, queue, job_type, tenant_id, partition_key, state, max_attempts,
                          origin_topic, lease_owner, lease_until, idempotency_key, created_at)
VALUES (%(id)s, %(queue)s, 'noop', 'acme', 'acme', %(state)s, 3, %(origin)s, %(owner)s,
        CASE WHEN %(owner)s::text IS NOT NULL THEN now() + interval '1 minute' END, %(key)s,
        now() - %(age)s * interval '1 second')
"""


def add_job(
    db: psycopg.Connection[Any],
    origin: str | None,
    *,
    queue: str = "default",
    owner: str | None = None,
    key: str | None = None,
    age: float = 0,
) -> uuid.UUID:
    job_id = uuid.uuid4()
    state = "leased" if owner else "runnable"
    db.execute(
        JOB,
        {"id": job_id, "queue": queue, "state": state, "origin": origin, "owner": owner,
         "key": key, "age": age},
    )  # fmt: skip
    return job_id


def test_rows_go_to_their_deployment_and_come_back(database: str) -> None:
    with psycopg.connect(psycopg_url(database), autocommit=True) as db:
        prod = add_job(db, "acme.prod.default")
        prod_retry = add_job(db, "acme.prod.default.retry.1")
        staging_lane = add_job(db, "staging.default.lane", owner="w-staging")
        default = add_job(db, "tenantq.default.retry.0")
        unseen = add_job(db, None)  # a cancel of a job no worker saw: no topic
        reports = add_job(db, "staging.reports", queue="reports")
        db.execute(
            "INSERT INTO tenantq_workers (id, hostname, pid, queues) VALUES "
            "('w-staging', 'h', 1, '{default}'), ('w-idle', 'h', 2, '{default}')"
        )
        db.execute(
            "INSERT INTO tenantq_outbox (queue, main_topic, job_id, tenant_id, topic, partition,"
            " value, headers) VALUES ('default', 'acme.prod.default', %s, 'acme',"
            " 'acme.prod.default', 0, '\\x00', '[]')",
            (prod,),
        )
        db.execute(
            "INSERT INTO tenantq_periodic (name, job_type, tenant_id, queue, schedule, next_tick,"
            " last_job_id) VALUES ('nightly', 'noop', 'ops', 'default', 'every 60s', now(), %s),"
            " ('weekly', 'noop', 'ops', 'reports', 'every 60s', now(), NULL),"
            " ('hourly', 'noop', 'ops', 'default', 'every 60s', now(), NULL)",
            (staging_lane,),
        )
        db.execute(
            "INSERT INTO tenantq_tenant_placement (queue, tenant_id, mode, automatic) VALUES"
            " ('default', 'whale', 'lane', true), ('nobody', 'acme', 'hashed', false)"
        )
        db.execute(
            "INSERT INTO tenantq_replay_audit (actor, queue, action, filter, dry_run, matched,"
            " replayed, job_ids) VALUES ('ops', 'default', 'replay', '{}', false, 1, 1, %s),"
            " ('ops', 'default', 'purge', '{}', true, 0, 0, NULL)",
            ([prod_retry],),
        )

    migrate_to(database, AFTER)

    with psycopg.connect(psycopg_url(database), autocommit=True) as db:

        def deployments(sql: str) -> dict[Any, str]:
            return {row[0]: row[1] for row in db.execute(sql).fetchall()}

        assert deployments("SELECT id, deployment FROM tenantq_jobs") == {
            prod: "acme.prod",
            prod_retry: "acme.prod",
            staging_lane: "staging",
            default: "tenantq",
            unseen: "tenantq",
            reports: "staging",
        }
        assert deployments("SELECT id, deployment FROM tenantq_workers") == {
            "w-staging": "staging",
            "w-idle": "tenantq",
        }
        assert deployments("SELECT job_id, deployment FROM tenantq_outbox") == {prod: "acme.prod"}
        assert deployments("SELECT name, deployment FROM tenantq_periodic") == {
            "nightly": "staging",  # its last job's
            "weekly": "staging",  # the only deployment with jobs in its queue
            "hourly": "tenantq",  # three deployments have jobs in "default": nothing says
        }
        assert sorted(
            db.execute("SELECT deployment, queue, tenant_id FROM tenantq_tenant_placement")
        ) == [
            ("acme.prod", "default", "whale"),
            ("staging", "default", "whale"),
            ("tenantq", "default", "whale"),
            ("tenantq", "nobody", "acme"),
        ]
        assert deployments("SELECT action, deployment FROM tenantq_replay_audit") == {
            "replay": "acme.prod",
            "purge": "tenantq",
        }
        # The keys are the deployment's now: one idempotency key in two deployments.
        db.execute(
            "INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key,"
            " state, max_attempts, idempotency_key, created_at) VALUES"
            " (%s, 'staging', 'default', 'noop', 'a', 'a', 'runnable', 3, 'k',"
            " now() - interval '1 hour'),"
            " (%s, 'acme.prod', 'default', 'noop', 'a', 'a', 'runnable', 3, 'k', now())",
            (older := uuid.uuid4(), newer := uuid.uuid4()),
        )
        with pytest.raises(psycopg.errors.NotNullViolation):
            add_job(db, "acme.prod.default")  # no deployment named: refused

    migrate_to(database, BEFORE, down=True)

    with psycopg.connect(psycopg_url(database), autocommit=True) as db:
        columns = db.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'deployment'"
            " AND table_name LIKE 'tenantq_%'"
        ).fetchall()
        assert columns == []
        assert db.execute(
            "SELECT queue, tenant_id FROM tenantq_tenant_placement ORDER BY 1"
        ).fetchall() == [("default", "whale"), ("nobody", "acme")]
        keys = dict(
            db.execute(
                "SELECT id, idempotency_key FROM tenantq_jobs WHERE id = ANY(%s)",
                ([older, newer],),
            ).fetchall()
        )
        assert keys == {older: "k", newer: None}  # the oldest keeps it; both jobs stay
        assert db.execute("SELECT count(*) FROM tenantq_jobs").fetchone() == (8,)

    migrate_to(database, AFTER)  # and up again
