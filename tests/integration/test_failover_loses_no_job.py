"""Guarantee: with ``worker.offsets_wait_for_standbys`` = 1, a failover to an asynchronous
standby that had not received the last transactions loses no acknowledged job. Replication is
cut while jobs flow, so the old primary writes claims and results the standby never gets; the
primary then crashes and the standby is promoted. The jobs whose rows or results went with
the old primary run again, every job ends succeeded, and Kafka is consumed to the end.

Slow (a PostgreSQL primary with a standby, a broker, in a home of its own)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from support import committed_offsets, counting_app, end_offsets, running_worker, wait_for
from topology_stack import (
    TopologyStack,
    cut_replication,
    fail_over_after_cut,
    node_url,
    topology_stack,
)

import tenantq
from tenantq.devstack.state import PRIMARY
from tenantq.store.engine import psycopg_url
from tenantq.topic_admin import ensure_topics
from tenantq.topics import consumer_group

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]

JOBS = 900
FLOW_SECONDS = 9.0


@pytest.fixture(scope="module")
def replicated() -> Iterator[TopologyStack]:
    with topology_stack(standby=True) as stack:
        yield stack


def snapshot(url: str) -> dict[uuid.UUID, tuple[str, int]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT id, state::text, attempts FROM tenantq_jobs").fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


@pytest.mark.timeout(600)
def test_a_failover_after_the_standby_lagged_loses_no_job(replicated: TopologyStack) -> None:
    with replicated.settings(
        "failover", worker={"offsets_wait_for_standbys": 1, "lease_seconds": 30.0}
    ) as settings:
        ensure_topics(settings)
        app, ran = counting_app(settings, "noop", seconds=0.005)
        job_ids: list[uuid.UUID] = []
        produced = threading.Event()

        def produce() -> None:
            with tenantq.Producer(settings, app) as producer:
                for step in range(30):
                    futures = [
                        producer.enqueue("noop", tenant=f"tenant-{n % 7}", payload={"n": n})
                        for n in range(step * JOBS // 30, (step + 1) * JOBS // 30)
                    ]
                    job_ids.extend(future.result(60).job_id for future in futures)
                    time.sleep(FLOW_SECONDS / 30)
            produced.set()

        database = make_url(settings.require_database_url()).database or ""
        with running_worker(app, settings, concurrency=8):
            producer = threading.Thread(target=produce, daemon=True)
            producer.start()
            time.sleep(3.0)
            cut_replication(replicated.stack)
            time.sleep(2.0)  # the old primary goes on alone
            before = snapshot(node_url(replicated.stack, PRIMARY, database))
            promoted_in = fail_over_after_cut(replicated.stack)
            after = snapshot(node_url(replicated.stack, PRIMARY, database))
            # The old primary cloned back as the standby: offsets wait for one to stream.
            replicated.up()
            assert produced.wait(120) and len(job_ids) == JOBS
            with psycopg.connect(psycopg_url(settings.require_database_url())) as db:
                wait_for(
                    lambda: _succeeded(db, job_ids) == JOBS,
                    timeout=180,
                    what="every job succeeded after the failover",
                )
        rows_lost = [job for job in before if job not in after]
        results_lost = [
            job
            for job, (state, _) in before.items()
            if state == "succeeded" and job in after and after[job][0] != "succeeded"
        ]
        print(
            f"promoted in {promoted_in:.2f}s; the old primary took {len(rows_lost)} job rows "
            f"and {len(results_lost)} results with it; runs: {sum(ran.values())} for {JOBS} jobs"
        )
        # Not a vacuous pass: the standby really lacked claims or results the worker had seen.
        assert rows_lost or results_lost
        assert set(ran) >= set(job_ids)
        group = consumer_group(settings.topic_prefix, "default")
        topic = f"{settings.topic_prefix}.default"
        assert committed_offsets(settings, group, topic) == {
            p: end for p, end in end_offsets(settings, topic).items() if end > 0
        }


def _succeeded(db: psycopg.Connection[Any], job_ids: list[uuid.UUID]) -> int:
    row = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'succeeded'",
        (job_ids,),
    ).fetchone()
    return int(row[0]) if row else 0
