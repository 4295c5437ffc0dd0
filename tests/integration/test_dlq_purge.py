"""Guarantee: purge deletes the DLQ records before --until and nothing else, refuses filters it
cannot honour (Kafka deletes only whole prefixes of a partition), changes no job row, and
leaves an audit row; a dry run deletes nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest
from dead_letter_jobs import FlakyApp, audit_rows, dlq_size, failing_charges, fill_dlq
from support import settings_environment, states
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.dlq import actions
from tenantq.dlq.purge import PurgePlan, plan_purge
from tenantq.dlq.reader import DeadLetterReader


def remaining(settings: tenantq.Settings) -> int:
    with DeadLetterReader(settings, "default") as reader:
        return reader.total


@pytest.mark.parametrize("extra", [["--tenant", "acme"], ["--since", "1d"]])
def test_purge_refuses_filters_it_cannot_honour(
    settings: tenantq.Settings, extra: list[str]
) -> None:
    result = CliRunner().invoke(
        cli, ["dlq", "purge", "--until", "1m", "--yes", *extra], env=settings_environment(settings)
    )
    assert result.exit_code == 2
    assert "no other filter" in result.output


def test_purge_until_deletes_older_records(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    ids = fill_dlq(flaky, settings, db, failing_charges(4))
    env = settings_environment(settings)
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).isoformat()
    runner = CliRunner()

    unconfirmed = runner.invoke(cli, ["dlq", "purge", "--until", later], env=env)
    assert unconfirmed.exit_code == 2 and "--yes" in unconfirmed.output

    dry = runner.invoke(
        cli, ["dlq", "purge", "--until", later, "--dry-run", "--actor", "purge-dry"], env=env
    )
    assert dry.exit_code == 0, dry.output
    assert "would delete 4 record(s)" in dry.output and "4 dead" in dry.output
    assert remaining(settings) == 4

    done = runner.invoke(
        cli, ["dlq", "purge", "--until", later, "--yes", "--actor", "purge-ops"], env=env
    )
    assert done.exit_code == 0, done.output
    assert remaining(settings) == 0
    assert dlq_size(settings) == 4  # offsets move on; the records are gone
    assert set(states(db, ids).values()) == {"dead"}
    audits = audit_rows(db, ["purge-dry", "purge-ops"])
    assert [row[:5] for row in audits] == [
        ("purge-dry", "purge", True, 4, 0),
        ("purge-ops", "purge", False, 4, 0),
    ]
    assert sorted(audits[1][5]) == sorted(ids)


def test_a_purge_that_fails_in_one_partition_is_audited_with_what_it_deleted(
    settings: tenantq.Settings,
    db: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    flaky: FlakyApp,
) -> None:
    ids = fill_dlq(flaky, settings, db, failing_charges(4))

    def plan_with_a_missing_partition(*args: Any) -> PurgePlan:
        # A partition the topic does not have: Kafka refuses its deletion, and only its.
        plan = plan_purge(*args)
        plan.cuts[999] = (0, 1)
        return plan

    monkeypatch.setattr(actions, "plan_purge", plan_with_a_missing_partition)
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).isoformat()
    failed = CliRunner().invoke(
        cli,
        ["dlq", "purge", "--until", later, "--yes", "--actor", "purge-partial"],
        env=settings_environment(settings),
    )
    assert failed.exit_code == 2, failed.output
    assert "failed in 1 of" in failed.output and "partition 999" in failed.output
    assert "Traceback" not in failed.output
    assert remaining(settings) == 0  # the real partitions were purged
    (audit,) = audit_rows(db, ["purge-partial"])
    assert audit[:5] == ("purge-partial", "purge", False, 4, 0)
    assert sorted(audit[5]) == sorted(ids)
