"""Guarantee: a message that is not an envelope (garbage bytes on the main topic) is
dead-lettered by the worker, listed by `tenantq dlq list`, and skipped by replay with the
reason, while the decodable dead jobs beside it are replayed."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from confluent_kafka import Producer
from dead_letter_jobs import FlakyApp, dlq_size, fill_dlq
from support import running_worker, settings_environment, wait_for
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.dlq.actions import replay_dead_letters
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.topics import main_topic


def test_garbage_is_listed_and_skipped(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    dead = fill_dlq(
        flaky, settings, db, [{"job_type": "charge", "tenant": "acme", "payload": {"fail": True}}]
    )
    producer = Producer(settings.kafka_client_config())
    producer.produce(main_topic(settings.topic_prefix, "default"), b"\x00not avro", key=b"acme")
    assert producer.flush(10) == 0
    with running_worker(flaky.app, settings):
        wait_for(lambda: dlq_size(settings) == 2, timeout=30, what="garbage dead-lettered")

    result = CliRunner().invoke(
        cli, ["dlq", "list", "--json", "--error-class", "Undecodable"],
        env=settings_environment(settings),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert len(listed) == 1
    assert listed[0]["error_class"] == "Undecodable:corrupt"
    assert listed[0]["replayable"] is False and listed[0]["job_id"] is None

    flaky.fixed.set()
    report, _ = replay_dead_letters(settings, "default", DeadLetterFilter(), actor="ops")
    assert report.matched == 2
    assert dict(report.actions) == {"replayed": 1, "skipped": 1}
    assert report.replayed_ids == dead
    [reason] = report.skip_reasons
    assert reason.startswith("undecodable (corrupt") and "no envelope to replay" in reason
