"""Guarantee: on a new deployment's empty, never-analysed job table, the worker's hot-path
statements are planned (once, generic, on the worker's own session settings) to reach jobs by
primary key, never by reading the whole table. A plan made then is kept for the connection's
life; a sequential scan in it costs every later batch the size of the table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support import migrated_database

import tenantq
from tenantq.store import statements
from tenantq.store.engine import connect, psycopg_url

#: What the worker's ledger, heartbeat and handler connections run per batch or per job.
HOT_PATH = {
    "JOB_CLAIM_BATCH": statements.JOB_CLAIM_BATCH,
    "JOB_STATE_BATCH": statements.JOB_STATE_BATCH,
    "JOB_BURY_EXHAUSTED": statements.JOB_BURY_EXHAUSTED,
    "JOB_CANCEL_WAITING": statements.JOB_CANCEL_WAITING,
    "JOB_COMPLETE_BATCH": statements.JOB_COMPLETE_BATCH,
    "JOB_COMPLETE_BATCH_AGAIN": statements.JOB_COMPLETE_BATCH_AGAIN,
    "JOB_CRASH_BATCH": statements.JOB_CRASH_BATCH,
    "LEASE_RENEW": statements.LEASE_RENEW,
    "JOB_CHECKPOINT": statements.JOB_CHECKPOINT,
    "WORKER_CRASHED": statements.WORKER_CRASHED,
}


@pytest.fixture
def empty_database(servers: tuple[str, str]) -> Iterator[str]:
    """A database just migrated: its job table empty and never analysed."""
    _, server_url = servers
    with migrated_database(server_url, "tenantq_plans_") as url:
        yield url


def generic_plan(connection: psycopg.Connection[Any], name: str, text: str) -> str:
    """The plan the session would keep for ``text``: prepared with ``$n`` for psycopg's named
    parameters, explained for all-NULL arguments (a generic plan does not look at them)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)[bs]", number, text)
    connection.execute(f"PREPARE {name.lower()} AS {sql}")
    arguments = ", ".join(["NULL"] * len(names))
    rows = connection.execute(f"EXPLAIN EXECUTE {name.lower()}({arguments})").fetchall()
    return "\n".join(row[0] for row in rows)


def test_hot_path_reaches_jobs_by_primary_key_on_a_new_table(empty_database: str) -> None:
    settings = tenantq.Settings(database_url=empty_database)
    with connect(settings, autocommit=True, generic_plans=True) as connection:
        plans = {name: generic_plan(connection, name, text) for name, text in HOT_PATH.items()}
    whole_table_reads = {
        name: plan
        for name, plan in plans.items()
        if re.search(r"Seq Scan on tenantq_jobs\b", plan)
        or re.search(r"Seq Scan on tenantq_attempt_log\b", plan)
    }
    assert not whole_table_reads, "\n\n".join(
        f"{name}:\n{plan}" for name, plan in whole_table_reads.items()
    )
    # The result batch finds each job by its key (not by a scan of the leased rows either).
    assert "Index Scan using pk_tenantq_jobs" in plans["JOB_COMPLETE_BATCH"]


#: Finished jobs, as a deployment's ledger holds them, analysed: the planner then believes
#: that almost no row has an owner.
FINISHED_JOBS = """
INSERT INTO tenantq_jobs (id, queue, job_type, tenant_id, partition_key, state, attempts,
                          max_attempts, finished_at)
SELECT gen_random_uuid(), 'history', 'noop', 'acme', 'acme', 'succeeded', 1, 3, now()
FROM generate_series(1, %(count)s)
"""
LEASED_JOBS = """
INSERT INTO tenantq_jobs (id, queue, job_type, tenant_id, partition_key, state, attempts,
                          max_attempts, lease_owner, lease_until)
SELECT gen_random_uuid(), 'default', 'noop', 'acme', 'acme', 'leased', 1, 3, %(owner)s,
       now() + interval '30 seconds'
FROM generate_series(1, %(count)s)
RETURNING id
"""


def test_lease_renewal_finds_each_lease_by_key_and_joins_nothing(empty_database: str) -> None:
    """The heartbeat's renewal, generic plan, on a ledger of finished jobs with 1,000 leases
    held: each access to the job table is by primary key, and no join compares leases with
    leases (it did: nested loops whose cost grew with the square of the leases held)."""
    owner = "w-plans"
    with psycopg.connect(psycopg_url(empty_database), autocommit=True) as db:
        db.execute(FINISHED_JOBS, {"count": 20_000})
        db.execute("VACUUM ANALYZE tenantq_jobs")
        held = [row[0] for row in db.execute(LEASED_JOBS, {"owner": owner, "count": 1_000})]
    settings = tenantq.Settings(database_url=empty_database)
    with connect(settings, autocommit=True, generic_plans=True) as connection:
        generic_plan(connection, "LEASE_RENEW", statements.LEASE_RENEW)
        listed = "{" + ",".join(str(job_id) for job_id in held) + "}"
        rows = connection.execute(
            f"EXPLAIN (ANALYZE) EXECUTE lease_renew('{listed}', '{owner}', 30, 1, 4)"
        ).fetchall()
        plan = "\n".join(row[0] for row in rows)
        renewed = connection.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE lease_until > now() + interval '29 seconds'"
            " AND heartbeat_at IS NOT NULL"
        ).fetchone()
    assert "Join" not in plan and "Nested Loop" not in plan, plan
    # By key: an index scan of the primary key, or a bitmap of it (either is linear).
    assert "Seq Scan on tenantq_jobs" not in plan, plan
    assert not re.search(r"\bix_tenantq_jobs", plan), plan  # no other index of the table
    assert plan.count("Index Cond: (id = ANY") == 3, plan
    assert renewed == (1_000,)
