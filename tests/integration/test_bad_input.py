"""Guarantee: bad input through every public interface gets a clear error, loses nothing and
takes no worker down. The kinds not covered elsewhere (the README's failure table lists all):

* producer arguments: a NaN delay, run_after in year 9999 or without a zone, max_attempts 0,
  a 10 MB payload, a NUL in the tenant id, a job id that is not a UUID, a payload that is
  not JSON, a queue that is not declared: each raises ``InvalidJobError`` (or a child)
  naming the argument, and nothing reaches Kafka;
* records written straight to a topic: a tombstone, an envelope without headers, one whose
  max_attempts no producer writes, a NUL in the job type, the same job twice, the same job id
  with another payload: each ends in the DLQ with its own reason or runs exactly once, and
  the valid job behind them on the same partition succeeds with the offsets past them all;
* CLI arguments: a payload that is not JSON, a year-9999 run_after, a NaN delay, a tenant id
  that breaks the rule, a job id that is not one: one line, status 2, nothing in Kafka;
* console API bodies and ids: a body of the wrong shape or not JSON at all, an id of 400
  digits, an action on an id that is not a UUID: a bounded 4xx, nothing changed.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient
from support import (
    all_in,
    caught_up,
    running_worker,
    settings_environment,
    tenantq_command,
    wait_for,
)
from test_failures import dlq_records
from test_producer import total_messages
from web_console import console_settings

import tenantq
from tenantq import headers
from tenantq.errors import InvalidJobError, InvalidTenantId, PayloadValidationError
from tenantq.schemas.envelope import Envelope, encode_envelope
from tenantq.topics import main_topic, retry_topic
from tenantq.web.app import create_app

TOKEN = "bad-input-token-for-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}"}

# -- producer arguments ----------------------------------------------------------------------

PRODUCER_ARGUMENTS = {
    "nan-delay": ({"delay": float("nan")}, InvalidJobError, "finite number"),
    "year-9999": (
        {"run_after": dt.datetime(9999, 12, 31, tzinfo=dt.UTC)},
        InvalidJobError,
        "days ahead",
    ),
    "naive-run-after": ({"run_after": dt.datetime(2030, 1, 1)}, InvalidJobError, "time zone"),
    "max-attempts-0": ({"max_attempts": 0}, InvalidJobError, "max_attempts"),
    "10-mb-payload": ({"payload": {"blob": "x" * 10_000_000}}, InvalidJobError, "bytes"),
    "nul-in-tenant": ({"tenant": "acme\x00evil"}, InvalidTenantId, "tenant"),
    "job-id-not-uuid": ({"job_id": "42; DROP TABLE"}, InvalidJobError, "job_id must be a UUID"),
    "payload-not-json": ({"payload": {"when": object()}}, PayloadValidationError, "JSON"),
    "undeclared-queue": ({"queue": "nope"}, InvalidJobError, "nope"),
}


@pytest.mark.parametrize("kind", list(PRODUCER_ARGUMENTS))
def test_bad_producer_arguments_raise_and_publish_nothing(
    settings: tenantq.Settings, kind: str
) -> None:
    arguments, error, named = PRODUCER_ARGUMENTS[kind]
    request: dict[str, Any] = {"tenant": "acme", "payload": {"n": 1}, **arguments}
    with tenantq.Producer(settings) as producer:
        with pytest.raises(error, match=named) as raised:
            producer.enqueue("resize", **request)
        assert len(str(raised.value)) < 500  # the value is named, not echoed whole
        # The producer is still good for the next job.
        assert producer.enqueue("resize", tenant="acme", payload={"n": 2}).result(30).offset >= 0
    prefix = settings.topic_prefix
    topics = [main_topic(prefix, "default")] + [
        retry_topic(prefix, "default", tier) for tier in range(3)
    ]
    assert sum(total_messages(settings, topic) for topic in topics) == 1


# -- records written straight to a topic -----------------------------------------------------


def envelope(**fields: Any) -> Envelope:
    values: dict[str, Any] = {
        "job_id": uuid.uuid4(),
        "queue": "default",
        "job_type": "fine",
        "tenant_id": "acme",
        "partition_key": "acme",
        "payload": b"{}",
        "created_at": dt.datetime.now(dt.UTC),
    }
    values.update(fields)
    return Envelope(**values)


def test_bad_records_on_a_topic_are_dead_lettered_or_run_once_and_the_partition_flows(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings()
    app = tenantq.App(settings)
    ran: list[uuid.UUID] = []

    @app.job("fine", max_attempts=3)
    def fine(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        ran.append(ctx.job_id)

    topic = main_topic(settings.topic_prefix, "default")
    with tenantq.Producer(settings, app) as producer:
        # Waiting its turn (pending) when a copy with another payload comes: a conflict.
        scheduled = producer.enqueue("fine", tenant="acme", payload={"n": 1}, delay=600)
        original = scheduled.result(30).job_id
    wait_for(lambda: all_in(db, [original], {"pending"}), timeout=30, what="pending row")
    twice = envelope(payload=b'{"n": 1}')
    no_headers = envelope()
    records: list[tuple[bytes | None, list[tuple[str, bytes]]]] = [
        (None, []),  # a tombstone
        (encode_envelope(no_headers), []),
        (encode_envelope(envelope(max_attempts=-5)), []),
        (encode_envelope(envelope(max_attempts=2**31 - 1)), []),
        (encode_envelope(envelope(job_type="fi\x00ne")), []),
        (encode_envelope(twice), [(headers.JOB_ID, str(twice.job_id).encode())]),
        (encode_envelope(twice), [(headers.JOB_ID, str(twice.job_id).encode())]),
        (encode_envelope(envelope(job_id=original, payload=b'{"n": 2, "changed": true}')), []),
    ]
    raw = Producer(settings.kafka_client_config())
    for value, written in records:
        raw.produce(topic, value=value, key=b"acme", partition=0, headers=written)
    assert raw.flush(30) == 0
    with tenantq.Producer(settings, app) as producer:
        good = producer.enqueue("fine", tenant="acme", payload={}).result(30)
    assert good.partition == 0, "behind the bad records"
    with running_worker(app, settings) as worker:
        valid = [no_headers.job_id, twice.job_id, good.job_id]
        wait_for(lambda: all_in(db, valid, {"succeeded"}), timeout=60, what="the valid ran")
        wait_for(
            lambda: caught_up(settings, worker.group_id, topic),
            timeout=30,
            what="offsets past every bad record",
        )
    # Each valid job ran once, under the id its envelope carries (none minted).
    assert sorted(map(str, ran)) == sorted(map(str, valid))
    row = db.execute(
        "SELECT state::text, convert_from(payload, 'UTF8') FROM tenantq_jobs WHERE id = %s",
        (original,),
    ).fetchone()
    assert row is not None and row[0] == "pending" and "changed" not in row[1], "original kept"
    letters = sorted(
        (r[headers.ERROR_CLASS], r.get(headers.ERROR_MESSAGE, "")) for r in dlq_records(settings)
    )
    classes = [error_class for error_class, _ in letters]
    assert classes == sorted(
        [
            "Undecodable:empty",
            "Undecodable:invalid_field",
            "Undecodable:invalid_field",
            "DatabaseRefused",
            "JobConflict",
        ]
    ), letters
    messages = dict(letters)
    assert "tombstone" in messages["Undecodable:empty"]
    assert "max_attempts" in messages["Undecodable:invalid_field"]
    # The NUL's own reason, not a batch's worth of reasons.
    assert "0x00" in messages["DatabaseRefused"] and ";" not in messages["DatabaseRefused"]
    assert "different payload" in messages["JobConflict"]


# -- CLI arguments -----------------------------------------------------------------------------

CLI_ARGUMENTS = {
    "payload-not-json": (["enqueue", "resize", "--tenant", "acme", "--payload", "{nope"], "JSON"),
    "year-9999": (
        ["enqueue", "resize", "--tenant", "acme", "--run-after", "9999-12-31T00:00:00+00:00"],
        "days ahead",
    ),
    "nan-delay": (["enqueue", "resize", "--tenant", "acme", "--delay", "nan"], "finite"),
    "tenant-breaking-the-rule": (
        ["enqueue", "resize", "--tenant", "acme corp <b>", "--payload", "{}"],
        "tenant",
    ),
    "job-id-not-a-uuid": (["jobs", "show", "12345678901234567890" * 20], "not a job id"),
}


@pytest.mark.parametrize("kind", list(CLI_ARGUMENTS))
def test_bad_cli_arguments_are_one_line_and_publish_nothing(
    settings: tenantq.Settings, kind: str
) -> None:
    arguments, said = CLI_ARGUMENTS[kind]
    completed = tenantq_command(arguments, settings_environment(settings))
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert len(lines) == 1 and "Traceback" not in completed.stderr, completed.stderr
    assert lines[0].startswith("tenantq") and said in lines[0] and len(lines[0]) <= 500
    assert total_messages(settings, main_topic(settings.topic_prefix, "default")) == 0


# -- console API bodies and ids ----------------------------------------------------------------


@pytest.fixture
def api(settings: tenantq.Settings) -> Iterator[TestClient]:
    app = create_app(console_settings(settings, TOKEN))
    try:
        yield TestClient(app, base_url="http://127.0.0.1:8765")
    finally:
        app.state.console.close()


API_REQUESTS = {
    "body-a-list": ("POST", "/api/dlq/replay", json.dumps([{"job_ids": ["x"]}]), 422),
    "body-a-string": ("POST", "/api/dlq/replay", json.dumps("replay everything"), 422),
    "body-wrong-types": (
        "POST",
        "/api/dlq/replay",
        json.dumps({"job_ids": {"a": 1}, "dry_run": "perhaps", "rate": [1]}),
        422,
    ),
    "body-not-json": ("POST", "/api/dlq/replay", "job_ids=all&dry_run=no", 422),
    "id-of-400-digits": ("GET", "/api/jobs/" + "9" * 400, None, 404),
    "action-on-a-non-uuid": ("POST", "/api/jobs/" + "9" * 400 + "/cancel", None, 404),
}


@pytest.mark.parametrize("kind", list(API_REQUESTS))
def test_bad_api_bodies_and_ids_are_a_bounded_4xx_that_changes_nothing(
    api: TestClient, db: psycopg.Connection[Any], kind: str
) -> None:
    method, path, body, status = API_REQUESTS[kind]
    before = db.execute(
        "SELECT (SELECT count(*) FROM tenantq_jobs), (SELECT count(*) FROM tenantq_replay_audit)"
    ).fetchone()
    answer = api.request(
        method,
        path,
        content=body,
        headers={**BEARER, "Content-Type": "application/json"} if body else BEARER,
    )
    assert answer.status_code == status, answer.text[:300]
    assert answer.json()["error"] and len(answer.content) < 3_000
    after = db.execute(
        "SELECT (SELECT count(*) FROM tenantq_jobs), (SELECT count(*) FROM tenantq_replay_audit)"
    ).fetchone()
    assert after == before
