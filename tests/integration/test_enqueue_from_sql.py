"""Guarantee: a job enqueued with ``tenantq_enqueue(...)`` from any Postgres client, here
``psql`` and raw SQL through psycopg, runs exactly when its transaction commits: a rolled-back
enqueue never runs, a committed one runs once through a real ``tenantq worker`` (whose relay
publishes it), one idempotency key enqueued twice is one job run once and the same id back,
a scheduled one runs at its time, and bad input raises at the call with a message naming the
argument, writing nothing; a payload that does not fit the job type's model is dead at
once in the worker."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support import WorkerProcess, all_in, count_of, wait_for

import tenantq
from tenantq.settings import QueueSettings
from tenantq.store.engine import psycopg_url
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics

PSQL = shutil.which("psql")

ENQUEUE = """
SELECT tenantq_enqueue('default', %(job_type)s, %(tenant)s, %(payload)s::jsonb,
                       idempotency_key => %(key)s, run_after => %(run_after)s,
                       topic_prefix => %(prefix)s)
"""

#: What a service in any language sends: two transactions, one rolled back, and an
#: idempotency key enqueued twice.
PSQL_SCRIPT = """
BEGIN;
SELECT tenantq_enqueue('default', 'marker', 'acme', '{"n": 2}',
                       topic_prefix => :'prefix') AS rolled_back \\gset
ROLLBACK;
BEGIN;
SELECT tenantq_enqueue('default', 'marker', 'acme', '{"n": 3}', 'invoice-42',
                       topic_prefix => :'prefix') AS committed \\gset
COMMIT;
SELECT tenantq_enqueue('default', 'marker', 'acme', '{"n": 3}', 'invoice-42',
                       topic_prefix => :'prefix') AS again \\gset
\\echo :rolled_back :committed :again
"""


@pytest.fixture(scope="module")
def deployment(servers: tuple[str, str], database_url: str) -> Iterator[tenantq.Settings]:
    """A deployment of this module's own with a ``tenantq worker`` of ``apps:APP`` running
    (its relay has registered queue ``default``)."""
    settings = tenantq.Settings(
        kafka_bootstrap_servers=servers[0],
        database_url=database_url,
        topic_prefix=f"t{uuid.uuid4().hex[:12]}",
        queues={"default": QueueSettings(partitions=4, retry_delays_seconds=(1.0, 3.0, 10.0))},
        metrics_port=0,
    )
    ensure_topics(settings)
    worker = WorkerProcess(settings, "apps:APP")
    try:
        with psycopg.connect(psycopg_url(database_url), autocommit=True) as db:
            wait_for(
                lambda: (
                    db.execute(
                        "SELECT 1 FROM tenantq_outbox_queues WHERE deployment = %s",
                        (settings.topic_prefix,),
                    ).fetchone()
                    is not None
                ),
                timeout=90,
                what="the worker's relay registers its queue",
            )
        yield settings
        assert worker.process.poll() is None, worker.output()[-4000:]
    finally:
        worker.terminate()
        delete_topics(settings, [spec.name for spec in declared_topics(settings)], timeout=10)


def enqueue(
    conn: psycopg.Connection[Any],
    settings: tenantq.Settings,
    *,
    job_type: str = "marker",
    tenant: str = "acme",
    payload: str = '{"n": 1}',
    key: str | None = None,
    run_after: Any = None,
) -> uuid.UUID:
    row = conn.execute(
        ENQUEUE,
        {"job_type": job_type, "tenant": tenant, "payload": payload, "key": key,
         "run_after": run_after, "prefix": settings.topic_prefix},
    ).fetchone()  # fmt: skip
    assert row is not None
    return uuid.UUID(str(row[0]))


def runs(db: psycopg.Connection[Any], job_id: uuid.UUID) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM test_executions WHERE job_id = %s AND note = 'done'",
        (job_id,),
    )


def exists(db: psycopg.Connection[Any], job_id: uuid.UUID) -> bool:
    return db.execute("SELECT 1 FROM tenantq_jobs WHERE id = %s", (job_id,)).fetchone() is not None


def test_raw_sql_enqueues_run_when_they_commit(
    deployment: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    settings = deployment
    with psycopg.connect(psycopg_url(settings.require_database_url())) as conn:
        rolled_back = enqueue(conn, settings, payload='{"n": 1}')
        conn.rollback()
        committed = enqueue(conn, settings, payload='{"n": 2}')
        conn.commit()
        keyed = enqueue(conn, settings, key="order-1")
        conn.commit()
        again = enqueue(conn, settings, key="order-1")
        conn.commit()
        due_at = conn.execute("SELECT now() + interval '2 seconds'").fetchone()[0]  # type: ignore[index]
        scheduled = enqueue(conn, settings, run_after=due_at)
        conn.commit()
        # Only the worker knows the job type's model: a payload that does not fit is dead there.
        misfit = enqueue(conn, settings, payload='{"n": "not a number"}')
        conn.commit()

        for arguments, words in [
            ({"tenant": "ac me"}, "tenant id 'ac me' has character ' ' at position 2"),
            ({"job_type": "send email"}, "job_type 'send email' must match"),
            ({"payload": '"' + "x" * 600_000 + '"'}, "the limit (max_payload_bytes) is 512000"),
        ]:
            with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
                enqueue(conn, settings, **arguments)
            assert words in str(refused.value)
            conn.rollback()

    assert again == keyed
    done = [committed, keyed, scheduled]
    wait_for(lambda: all_in(db, done, {"succeeded"}), timeout=90, what="the committed jobs ran")
    time.sleep(1.0)  # room for a stray duplicate to show up
    assert [runs(db, job_id) for job_id in done] == [1, 1, 1]
    assert not exists(db, rolled_back) and runs(db, rolled_back) == 0
    wait_for(lambda: all_in(db, [misfit], {"dead"}), timeout=30, what="the misfit buried")
    misfit_row = db.execute(
        "SELECT attempts, last_error_class FROM tenantq_jobs WHERE id = %s", (misfit,)
    ).fetchone()
    assert misfit_row == (1, "tenantq.errors.PayloadValidationError") and runs(db, misfit) == 0
    started = db.execute(
        "SELECT min(at) FROM test_executions WHERE job_id = %s", (scheduled,)
    ).fetchone()
    assert started is not None and started[0] >= due_at
    left = db.execute(
        "SELECT count(*) FROM tenantq_outbox WHERE deployment = %s", (settings.topic_prefix,)
    )
    assert left.fetchone() == (0,)


@pytest.mark.skipif(PSQL is None, reason="psql (the PostgreSQL client) is not installed")
def test_psql_enqueues_run_when_they_commit(
    deployment: tenantq.Settings, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    settings = deployment
    url = psycopg_url(settings.require_database_url())
    script = tmp_path / "enqueue.sql"
    script.write_text(PSQL_SCRIPT)
    command = [str(PSQL), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v",
               f"prefix={settings.topic_prefix}", "-d", url]  # fmt: skip
    done = subprocess.run([*command, "-f", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rolled_back, committed, again = (uuid.UUID(text) for text in done.stdout.split())
    assert again == committed

    bad = tmp_path / "bad.sql"
    bad.write_text(
        "SELECT tenantq_enqueue('default', 'marker', 'ac me', '{}', topic_prefix => :'prefix');\n"
    )
    refused = subprocess.run([*command, "-f", str(bad)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 3  # psql: a statement failed under ON_ERROR_STOP
    assert (
        "ERROR:  tenantq_enqueue: tenant id 'ac me' has character ' ' at position 2; "
        "allowed: letters, digits and . _ : -" in refused.stderr
    )

    wait_for(lambda: all_in(db, [committed], {"succeeded"}), timeout=90, what="the job ran")
    time.sleep(1.0)
    assert runs(db, committed) == 1
    assert not exists(db, rolled_back) and runs(db, rolled_back) == 0
