"""Guarantee: a canary replay stops when the canary jobs do not succeed: only the canary is
replayed, the rest of the DLQ stays dead, and the run says why (exit code 1 at the CLI)."""

from __future__ import annotations

from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, audit_rows, failing_charges, fill_dlq
from support import running_worker, states

import tenantq
from tenantq.dlq.actions import replay_dead_letters
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.dlq.replay import ReplayOptions


def test_failed_canary_stops_the_replay(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    ids = fill_dlq(flaky, settings, db, failing_charges(5))
    # No fix deployed: the canary dies again.
    with running_worker(flaky.app, settings):
        report, _ = replay_dead_letters(
            settings,
            "default",
            DeadLetterFilter(),
            actor="canary-ops",
            options=ReplayOptions(canary=2, canary_timeout=30, rate=50),
        )
    assert not report.ok
    assert report.stopped is not None and "canary of 2 failed: 2 ended dead" in report.stopped
    assert len(report.replayed_ids) == 2
    canary = set(report.replayed_ids)
    assert all(flaky.calls[job] == (2 if job in canary else 1) for job in ids)
    assert set(states(db, ids).values()) == {"dead"}
    [audit] = audit_rows(db, ["canary-ops"])
    assert audit[3] == 2 and audit[4] == 2 and set(audit[5]) == canary
