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
import tenantq
from support import migrated_database
from tenantq.store import statements
from tenantq.store.engine import connect

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
        or re.search(r"Seq Scan on tenantq_job_attempts\b", plan)
    }
    assert not whole_table_reads, "\n\n".join(
        f"{name}:\n{plan}" for name, plan in whole_table_reads.items()
    )
    # The result batch finds each job by its key (not by a scan of the leased rows either).
    assert "Index Scan using pk_tenantq_jobs" in plans["JOB_COMPLETE_BATCH"]
