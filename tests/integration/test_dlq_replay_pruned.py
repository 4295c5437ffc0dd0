"""Guarantee: `tenantq dlq replay` refuses a dead letter whose job row was pruned, saying so:
nothing is published and no row is made, so a job whose history is gone never runs again as
if it were new."""

from __future__ import annotations

from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, failing_charges, fill_dlq
from support import end_offsets, settings_environment, states
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.topics import main_topic


def test_replay_refuses_pruned_jobs(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    ids = fill_dlq(flaky, settings, db, failing_charges(2))
    topic = main_topic(settings.topic_prefix, "default")
    runner = CliRunner()
    environment = settings_environment(settings)

    pruned = runner.invoke(cli, ["prune", "--older-than", "0s", "--state", "dead"], env=environment)
    assert pruned.exit_code == 0, pruned.output
    assert states(db, ids) == {}
    main_end = end_offsets(settings, topic)

    result = runner.invoke(cli, ["dlq", "replay", "--actor", "alice"], env=environment)
    assert "its job row was pruned" in result.output, result.output
    assert "skipped 2" in result.output, result.output
    assert end_offsets(settings, topic) == main_end
    assert states(db, ids) == {}
