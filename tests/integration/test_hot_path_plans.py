"""Guarantee: on a new deployment's empty, never-analysed job table, the worker's hot-path
statements are planned (once, generic, on the worker's own session settings) to reach jobs by
primary key, never by reading the whole table. A plan made then is kept for the connection's
life; a sequential scan in it costs every later batch the size of the table. Every row they
reach is checked to be their deployment's, and the statements that search (stats, prune, a
crashed worker's leases) read another deployment's rows not at all."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

import tenantq
from tenantq.store import console, retention, statements, stats
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


def prepare(connection: psycopg.Connection[Any], name: str, text: str) -> list[str]:
    """Prepare ``text`` as ``name`` with ``$n`` for psycopg's named parameters; returns the
    parameter names in ``$n`` order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)[bs]", number, text)
    connection.execute(f"PREPARE {name.lower()} AS {sql}")
    return names


def generic_plan(
    connection: psycopg.Connection[Any], name: str, text: str, *, as_json: bool = False
) -> Any:
    """The plan the session would keep for ``text``, explained for all-NULL arguments (a
    generic plan does not look at them): text, or the JSON plan tree."""
    names = prepare(connection, name, text)
    arguments = ", ".join(["NULL"] * len(names))
    form = "(FORMAT JSON) " if as_json else ""
    rows = connection.execute(f"EXPLAIN {form}EXECUTE {name.lower()}({arguments})").fetchall()
    if as_json:
        return rows[0][0][0]["Plan"]
    return "\n".join(row[0] for row in rows)


#: Tables that have a deployment column (the attempt log belongs to its job's).
SCOPED_TABLES = ("tenantq_jobs", "tenantq_workers")
#: Conditions of a plan node that can carry the deployment.
CONDITIONS = ("Index Cond", "Recheck Cond", "Filter", "Conflict Filter", "Join Filter")


def unscoped_reads(node: dict[str, Any]) -> list[str]:
    """``alias of table`` for each node of a plan tree that reads a scoped table without a
    condition on its deployment (an update's own node finds its rows through a child)."""
    found = []
    scans = node.get("Relation Name") in SCOPED_TABLES and (
        node["Node Type"] != "ModifyTable" or "Conflict Filter" in node
    )
    if scans and not any("deployment" in node.get(key, "") for key in CONDITIONS):
        found.append(f"{node.get('Alias')} of {node['Relation Name']}")
    for child in node.get("Plans", ()):
        found.extend(unscoped_reads(child))
    return found


#: What a statement may read without its deployment: ``JOB_STATE_BATCH`` looks at any row of
#: the ids it is given, to tell a job of another deployment (a conflict) from no job.
UNSCOPED_BY_DESIGN = {"JOB_STATE_BATCH": ["x of tenantq_jobs"]}


def test_every_hot_path_read_is_of_its_own_deployment(fresh_database: str) -> None:
    settings = tenantq.Settings(database_url=fresh_database)
    with connect(settings, autocommit=True, generic_plans=True) as connection:
        plans = {
            name: generic_plan(connection, name, text, as_json=True)
            for name, text in HOT_PATH.items()
        }
    for name, text in HOT_PATH.items():
        assert "%(deployment)" in text, name
    unscoped = {name: unscoped_reads(plan) for name, plan in plans.items()}
    assert {name: reads for name, reads in unscoped.items() if reads} == UNSCOPED_BY_DESIGN


def test_hot_path_reaches_jobs_by_primary_key_on_a_new_table(fresh_database: str) -> None:
    settings = tenantq.Settings(database_url=fresh_database)
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
INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, state,
                          attempts, max_attempts, finished_at)
SELECT gen_random_uuid(), %(deployment)s, 'history', 'noop', 'acme', 'acme', 'succeeded', 1, 3,
       now() - interval '1 day'
FROM generate_series(1, %(count)s)
"""
LEASED_JOBS = """
INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, state,
                          attempts, max_attempts, lease_owner, lease_until)
SELECT gen_random_uuid(), %(deployment)s, 'default', 'noop', 'acme', 'acme', 'leased', 1, 3,
       %(owner)s, now() + interval '30 seconds'
FROM generate_series(1, %(count)s)
RETURNING id
"""
WAITING_JOBS = """
INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, state,
                          max_attempts, run_after)
SELECT gen_random_uuid(), %(deployment)s, 'default', 'noop', 'acme', 'acme', 'runnable', 3,
       now() - interval '1 minute'
FROM generate_series(1, %(count)s)
"""
WORKER = """
INSERT INTO tenantq_workers (deployment, id, hostname, pid, queues)
VALUES (%(deployment)s, %(owner)s, 'host', 1, '{default}')
"""


def test_lease_renewal_finds_each_lease_by_key_and_joins_nothing(fresh_database: str) -> None:
    """The heartbeat's renewal, generic plan, on a ledger of finished jobs with 1,000 leases
    held: each access to the job table is by primary key, and no join compares leases with
    leases (it did: nested loops whose cost grew with the square of the leases held)."""
    owner = "w-plans"
    settings = tenantq.Settings(database_url=fresh_database)
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        history = {"deployment": settings.topic_prefix, "count": 20_000}
        db.execute(FINISHED_JOBS, history)
        db.execute("VACUUM ANALYZE tenantq_jobs")
        leased = {"deployment": settings.topic_prefix, "owner": owner, "count": 1_000}
        held = [row[0] for row in db.execute(LEASED_JOBS, leased)]
    with connect(settings, autocommit=True, generic_plans=True) as connection:
        names = prepare(connection, "LEASE_RENEW", statements.LEASE_RENEW)
        arguments = {
            "ids": "'{" + ",".join(str(job_id) for job_id in held) + "}'",
            "deployment": f"'{settings.topic_prefix}'",
            "owner": f"'{owner}'",
            "lease_seconds": "30",
            "running": "1",
            "slots": "4",
        }
        listed = ", ".join(arguments[name] for name in names)
        rows = connection.execute(f"EXPLAIN (ANALYZE) EXECUTE lease_renew({listed})").fetchall()
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


def rows_read(node: dict[str, Any]) -> int:
    """Rows of the job table that the nodes of an analysed plan read (returned or removed)."""
    read = 0
    if node.get("Relation Name") == "tenantq_jobs" and node["Node Type"] != "ModifyTable":
        per_loop = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        per_loop += node.get("Rows Removed by Index Recheck", 0)
        read += int(per_loop * node.get("Actual Loops", 1))
    return read + sum(rows_read(child) for child in node.get("Plans", ()))


#: Statements that search a deployment's rows (not by key), with their arguments.
SEARCHES = {
    "JOB_STATS_BY_TENANT": (stats.JOB_STATS_BY_TENANT, {"queues": None, "top": 20}),
    "JOB_OLDEST_RUNNABLE_AGE": (stats.JOB_OLDEST_RUNNABLE_AGE, {"queues": ["default"]}),
    "JOB_FINISHED_PER_MINUTE": (
        console.JOB_FINISHED_PER_MINUTE,
        {"queues": ["default", "history"], "minutes": 3 * 24 * 60},
    ),
    "JOB_PRUNE_BATCH": (
        retention.JOB_PRUNE_BATCH,
        {"succeeded": 3_600, "dead": 3_600, "canceled": 3_600, "limit": 1_000},
    ),
    "WORKER_CRASHED": (statements.WORKER_CRASHED, {"id": "w-plans", "reason": "test"}),
}


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_searches_read_nothing_of_another_deployment(
    fresh_database: str, plan_cache_mode: str
) -> None:
    """Another deployment's ledger (20,000 finished jobs a day old, 2,000 due, 1,000 leases
    of a worker id that this deployment's worker has too) is not read by this deployment's
    stats, prune or crash release: each reads its own few rows through an index that leads
    with the deployment, whichever plan it gets."""
    ours, theirs = "ours", "theirs"
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        db.execute(FINISHED_JOBS, {"deployment": theirs, "count": 20_000})
        db.execute(WAITING_JOBS, {"deployment": theirs, "count": 2_000})
        db.execute(LEASED_JOBS, {"deployment": theirs, "owner": "w-plans", "count": 1_000})
        db.execute(WORKER, {"deployment": theirs, "owner": "w-plans"})
        db.execute(WAITING_JOBS, {"deployment": ours, "count": 5})
        db.execute(LEASED_JOBS, {"deployment": ours, "owner": "w-plans", "count": 5})
        db.execute(WORKER, {"deployment": ours, "owner": "w-plans"})
        db.execute("VACUUM ANALYZE tenantq_jobs, tenantq_workers")
        db.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        read = {}
        for name, (text, arguments) in SEARCHES.items():
            names = prepare(db, name, text)
            values = {"deployment": ours, **arguments}
            with db.transaction(force_rollback=True), psycopg.ClientCursor(db) as cursor:
                placeholders = ", ".join(["%s"] * len(names))
                cursor.execute(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name.lower()}({placeholders})",
                    [values[parameter] for parameter in names],
                )
                row = cursor.fetchone()
            assert row is not None
            read[name] = rows_read(row[0][0]["Plan"])
        left = db.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE deployment = %s AND state = 'leased'",
            (theirs,),
        ).fetchone()
    assert {name: count for name, count in read.items() if count > 10} == {}, read
    assert left == (1_000,)
