"""Guarantee: DLQ filters (tenant, job type, error-class prefix, job id, time window) select
exactly the records they name, in `list` and in `replay`: a filtered replay brings back only
the jobs it matched."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, audit_rows, fill_dlq
from support import all_in, running_worker, settings_environment, states, wait_for
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.dlq.actions import replay_dead_letters, selected
from tenantq.dlq.filter import DeadLetterFilter


def test_filters_select_the_right_records(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    jobs = [
        {"job_type": "charge", "tenant": "acme", "payload": {"fail": True, "declined": True}},
        {"job_type": "charge", "tenant": "acme", "payload": {"fail": True}},
        {"job_type": "export", "tenant": "acme", "payload": {"fail": True}},
        {"job_type": "charge", "tenant": "globex", "payload": {"fail": True, "declined": True}},
        {"job_type": "export", "tenant": "globex", "payload": {"fail": True}},
        {"job_type": "export", "tenant": "globex", "payload": {"fail": False}},
    ]
    ids = fill_dlq(flaky, settings, db, jobs)

    def select(**options: Any) -> list[Any]:
        where = DeadLetterFilter.parse(**options)
        with selected(settings, "default", where) as letters:
            return sorted(letter.job_id for letter in letters)

    assert select() == sorted(ids[:5])
    assert select(tenants=["acme"]) == sorted(ids[:3])
    assert select(job_types=["export"]) == sorted([ids[2], ids[4]])
    assert select(error_classes=["dead_letter_jobs.Card"]) == sorted([ids[0], ids[3]])
    assert select(tenants=["globex"], job_types=["charge"]) == [ids[3]]
    assert select(job_ids=[str(ids[1]), str(ids[4])]) == sorted([ids[1], ids[4]])
    assert select(since="10m") == sorted(ids[:5])
    assert select(until="10m") == []
    assert select(since="2026-01-01T00:00:00Z", until="1d") == []

    env = settings_environment(settings)
    result = CliRunner().invoke(
        cli, ["dlq", "list", "--json", "--tenant", "globex", "--limit", "1"], env=env
    )
    assert result.exit_code == 0, result.output
    assert [item["tenant"] for item in json.loads(result.output)] == ["globex"]
    shown = CliRunner().invoke(cli, ["dlq", "show", str(ids[3])], env=env)
    assert shown.exit_code == 0, shown.output
    assert "card declined" in shown.output and "declined" in shown.output

    flaky.fixed.set()
    with running_worker(flaky.app, settings):
        report, _ = replay_dead_letters(
            settings, "default", DeadLetterFilter.parse(tenants=["acme"]), actor="filters-ops"
        )
        assert sorted(report.replayed_ids) == sorted(ids[:3])
        wait_for(lambda: all_in(db, ids[:3], {"succeeded"}), timeout=60, what="acme replayed")
    assert set(states(db, [ids[3], ids[4]]).values()) == {"dead"}
    [audit] = audit_rows(db, ["filters-ops"])
    assert audit[6]["tenants"] == ["acme"] and sorted(audit[5]) == sorted(ids[:3])
