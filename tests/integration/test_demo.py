"""Guarantee: ``tenantq demo`` on the real servers ends with every job terminal, and both the
dead jobs and the dead-letter topic are exactly the planned permanent failures plus the one
poison job (which crashes its worker process until its attempts are used up)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from support import run_tool

import tenantq
from tenantq.demo.kafka import read_dead_letters
from tenantq.settings import QueueSettings
from tenantq.topic_admin import declared_topics, delete_topics


def test_demo_every_job_terminal_and_dlq_is_permanent_plus_poison(
    servers: tuple[str, str], database_url: str, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    bootstrap, _ = servers
    report = tmp_path / "report"
    run_tool(
        [sys.executable, "-m", "tenantq.cli", "demo", "--jobs", "300", "--tenants", "12"]
        + ["--report-dir", str(report), "--timeout", "80"],
        servers,
        database_url,
        timeout=150,
    )
    facts = json.loads((report / "summary.json").read_text())
    assert (report / "report.md").exists()
    settings = tenantq.Settings(
        kafka_bootstrap_servers=bootstrap,
        database_url=database_url,
        topic_prefix=facts["topic_prefix"],
        queues={"default": QueueSettings(partitions=12, retry_delays_seconds=(1.0, 3.0, 10.0))},
    )
    try:
        job_ids = [uuid.UUID(value) for value in facts["job_ids"]]
        rows = db.execute(
            "SELECT id, state::text FROM tenantq_jobs WHERE id = ANY(%s)", (job_ids,)
        ).fetchall()
        states = {row[0]: row[1] for row in rows}
        assert len(states) == len(job_ids) == 300
        assert set(states.values()) <= {"succeeded", "dead"}, states
        expected_dead = {uuid.UUID(value) for value in facts["expected_dead"]}
        assert len(expected_dead) == facts["planned"]["permanent"] + facts["planned"]["poison"]
        assert facts["planned"]["poison"] == 1
        assert {job_id for job_id, state in states.items() if state == "dead"} == expected_dead
        letters = read_dead_letters(settings, "default")
        assert letters.distinct_job_ids == expected_dead
        assert letters.total == len(expected_dead)
        assert letters.by_error_class["ProcessCrashed"] == 1  # the poison: each crash pinned on it
    finally:
        delete_topics(settings, [spec.name for spec in declared_topics(settings)], timeout=10)
