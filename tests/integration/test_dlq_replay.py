"""Guarantee: replaying the DLQ after a fix runs each dead job again exactly once. A dry run
changes nothing (no row, no message) yet leaves a dry-run audit row; the replay makes the
dead jobs succeed; a second replay runs nothing and reports them skipped; every run leaves an
audit row naming the actor, the counts and the job ids."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, audit_rows, fill_dlq
from support import all_in, end_offsets, running_worker, settings_environment, states, wait_for
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.dlq.actions import replay_dead_letters
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.topics import main_topic


def test_dry_run_then_replay_then_replay_again(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    jobs = [
        {"job_type": "charge", "tenant": f"tenant-{i % 3}", "payload": {"fail": i < 6, "i": i}}
        for i in range(9)
    ]
    ids = fill_dlq(flaky, settings, db, jobs)
    dead, done = ids[:6], ids[6:]
    assert all(flaky.calls[job] == 1 for job in ids)
    topic = main_topic(settings.topic_prefix, "default")
    main_end = end_offsets(settings, topic)

    # Dry run through the command line: says what would happen, changes nothing.
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["dlq", "replay", "--dry-run", "--actor", "alice"],
        env=settings_environment(settings),
    )
    assert result.exit_code == 0, result.output
    assert "6 would be replayed" in result.output
    assert all_in(db, dead, {"dead"})
    assert end_offsets(settings, topic) == main_end
    replays = db.execute("SELECT sum(replays) FROM tenantq_jobs WHERE id = ANY(%s)", (dead,))
    assert replays.fetchone() == (0,)

    # The fix is deployed; replay for real while a worker runs.
    flaky.fixed.set()
    with running_worker(flaky.app, settings, concurrency=4):
        report, _ = replay_dead_letters(settings, "default", DeadLetterFilter(), actor="bob")
        assert report.ok
        assert dict(report.actions) == {"replayed": 6}
        assert sorted(report.replayed_ids) == sorted(dead)
        wait_for(lambda: all_in(db, dead, {"succeeded"}), timeout=60, what="replayed jobs done")
        assert all(flaky.calls[job] == 2 for job in dead)
        assert all(flaky.replays_seen[job] == 1 for job in dead)
        assert all(flaky.calls[job] == 1 for job in done)

        # Replaying the same DLQ again runs nothing: every job is skipped as succeeded.
        calls_before = flaky.call_count()
        again, _ = replay_dead_letters(settings, "default", DeadLetterFilter(), actor="carol")
        assert dict(again.actions) == {"skipped": 6}
        assert dict(again.skip_reasons) == {"job is succeeded": 6}
        time.sleep(2.0)  # time enough for a stray message to be run, were there one
        assert flaky.call_count() == calls_before
    assert set(states(db, dead).values()) == {"succeeded"}
    rows = db.execute(
        "SELECT min(replays), max(replays), max(attempts) FROM tenantq_jobs WHERE id = ANY(%s)",
        (dead,),
    ).fetchone()
    assert rows == (1, 1, 1)

    audits = audit_rows(db, ["alice", "bob", "carol"])
    assert [row[:5] for row in audits] == [
        ("alice", "replay", True, 6, 6),
        ("bob", "replay", False, 6, 6),
        ("carol", "replay", False, 6, 0),
    ]
    assert sorted(audits[0][5]) == sorted(dead)
    assert sorted(audits[1][5]) == sorted(dead)
    assert audits[2][5] == []
    assert audits[1][6]["tenants"] == [] and audits[1][6]["limit"] is None
    json.dumps(audits[1][6])  # the filter is stored as plain JSON
