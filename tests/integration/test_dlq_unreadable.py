"""Guarantee: records on a DLQ topic that do not parse blind nothing. Bad letters written
straight to the topic (a dead-at time of -99999999999999999 or in microseconds, no headers
and a body that is not an envelope, markup and escape sequences in the text) are listed as
unreadable by `tenantq dlq list`, the console's pages and ``GET /api/dlq``, shown by their
place (`dlq show P@O`, ``/dlq/letters/P@O``), never replayed, and counted as skipped by
replay (CLI and API) and purge; the good letters beside them are replayed and succeed."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import psycopg
from confluent_kafka import Producer
from dead_letter_jobs import FlakyApp, audit_rows, dlq_size, failing_charges, fill_dlq
from fastapi.testclient import TestClient
from support import all_in, running_worker, settings_environment, wait_for
from typer.testing import CliRunner
from web_console import console_settings

import tenantq
from tenantq import headers
from tenantq.cli import app as cli
from tenantq.dlq.reader import DeadLetterReader
from tenantq.schemas.envelope import Envelope, encode_envelope
from tenantq.topics import dlq_topic
from tenantq.web.app import create_app

TOKEN = "unreadable-letters-token"


def write_bad_letters(
    settings: tenantq.Settings, copied_from: uuid.UUID
) -> dict[str, tuple[int, int]]:
    """Write four letters no worker would, straight to the DLQ with a plain producer; returns
    where each landed (partition, offset)."""
    with DeadLetterReader(settings, "default") as reader:
        (good,) = [letter for letter in reader.records() if letter.job_id == copied_from]
    stranger = Envelope(
        uuid.uuid4(), "default", "charge", "acme", "acme", b"{}", dt.datetime.now(dt.UTC)
    )
    worker_said = [(name, value) for name, value in good.headers if name != headers.DEAD_AT_MS]
    letters: dict[str, tuple[bytes | None, list[tuple[str, bytes]]]] = {
        # A copy of a good letter, its time of death written by a broken clock.
        "year -3166904": (
            good.value,
            [*worker_said, (headers.DEAD_AT_MS, b"-99999999999999999")],
        ),
        # Microseconds where milliseconds belong, on garbage the "worker" called undecodable.
        "microseconds": (
            b"\x00garbage",
            [
                (headers.ERROR_CLASS, b"Undecodable:corrupt"),
                (headers.DEAD_AT_MS, b"1796609536579000"),
            ],
        ),
        # Nothing tenantq wrote: no headers, and a body that is not an envelope.
        "bare": (b"not avro at all", []),
        # Readable, but its text is markup and escape sequences (its job has no row: pruned).
        "markup": (
            encode_envelope(stranger),
            [
                (headers.ERROR_CLASS, b"[/]boom"),
                (headers.ERROR_MESSAGE, b"[bold]x\n\x1b[2Jcleared"),
                (headers.DEAD_AT_MS, str(int(dt.datetime.now(dt.UTC).timestamp() * 1000)).encode()),
            ],
        ),
    }
    producer = Producer(settings.kafka_client_config())
    placed: dict[str, tuple[int, int]] = {}

    def delivered(name: str) -> Any:
        def report(error: Any, message: Any) -> None:
            assert error is None, error
            placed[name] = (message.partition(), message.offset())

        return report

    for name, (value, written) in letters.items():
        producer.produce(
            dlq_topic(settings.topic_prefix, "default"),
            value,
            key=b"acme",
            headers=written,
            partition=1,
            on_delivery=delivered(name),
        )
    assert producer.flush(10) == 0
    return placed


def test_bad_letters_are_listed_as_unreadable_and_the_good_ones_replay(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    first, second = fill_dlq(flaky, settings, db, failing_charges(2))
    placed = write_bad_letters(settings, copied_from=first)
    assert dlq_size(settings) == 6
    # Wide enough that no table folds a word the test looks for.
    environment = {**settings_environment(settings), "COLUMNS": "300"}
    runner = CliRunner()

    listed = runner.invoke(cli, ["dlq", "list", "--json", "--limit", "0"], env=environment)
    assert listed.exit_code == 0, listed.output
    letters = json.loads(listed.output)
    assert len(letters) == 6
    unreadable = {
        (item["dlq_partition"], item["dlq_offset"]): item for item in letters if item["unreadable"]
    }
    assert set(unreadable) == {placed["year -3166904"], placed["microseconds"], placed["bare"]}
    assert (
        "tenantq-dead-at-ms: -99999999999999999 is out of range"
        in unreadable[placed["year -3166904"]]["unreadable_reason"]
    )
    assert (
        "tenantq-dead-at-ms: 1796609536579000 is out of range"
        in unreadable[placed["microseconds"]]["unreadable_reason"]
    )
    assert unreadable[placed["bare"]]["unreadable_reason"].startswith("body: not an envelope")
    assert all(not item["replayable"] for item in unreadable.values())
    # What could be read is kept: the copy still names its job, its other headers parse.
    copy = unreadable[placed["year -3166904"]]
    assert copy["job_id"] == str(first) and copy["attempts"] is not None
    assert [headers.DEAD_AT_MS, "-99999999999999999"] in copy["raw_headers"]

    table = runner.invoke(cli, ["dlq", "list"], env=environment)
    assert table.exit_code == 0, table.output
    assert table.output.count("UNREADABLE") == 3 and "3 unreadable" in table.output
    assert "[/]boom" in table.output and "\x1b" not in table.output

    partition, offset = placed["bare"]
    shown = runner.invoke(cli, ["dlq", "show", f"{partition}@{offset}"], env=environment)
    assert shown.exit_code == 0, shown.output
    assert "UNREADABLE dead letter" in shown.output and "not an envelope" in shown.output
    by_job = runner.invoke(cli, ["dlq", "show", str(first), "--json"], env=environment)
    assert by_job.exit_code == 0, by_job.output
    assert sorted(item["unreadable"] for item in json.loads(by_job.output)) == [False, True]

    dry = runner.invoke(
        cli, ["dlq", "replay", "--dry-run", "--actor", "it-unreadable-dry"], env=environment
    )
    assert dry.exit_code == 0, dry.output
    assert "skipped 3 unreadable record(s)" in dry.output and "2 would be replayed" in dry.output

    client = TestClient(create_app(console_settings(settings, TOKEN)), base_url="http://127.0.0.1")
    api = client.get("/api/dlq", params={"limit": 100})
    assert api.status_code == 200 and api.json()["unreadable"] == 3
    page = client.get("/dlq")
    assert page.status_code == 200 and page.text.count('class="unreadable"') == 3
    assert "3 unreadable record(s)" in page.text and "[/]boom" in page.text
    letter = client.get(f"/dlq/letters/{partition}@{offset}")
    assert letter.status_code == 200 and "Unreadable, never replayed" in letter.text
    assert client.get(f"/dlq/letters/{first}").status_code == 200
    preview = client.post(
        "/api/dlq/replay",
        json={"job_ids": [str(first), str(second)]},
        headers={"Authorization": f"Bearer {TOKEN}", "X-Tenantq-Actor": "it-unreadable"},
    )
    assert preview.status_code == 200, preview.text
    assert preview.json()["unreadable"] == 1
    assert sorted(preview.json()["replayed"]) == sorted([str(first), str(second)])

    purge = runner.invoke(
        cli,
        ["dlq", "purge", "--until", "0s", "--dry-run", "--actor", "it-unreadable-purge"],
        env=environment,
    )
    assert purge.exit_code == 0, purge.output
    assert "3 unreadable" in purge.output, purge.output

    flaky.fixed.set()
    replay = runner.invoke(cli, ["dlq", "replay", "--actor", "it-unreadable"], env=environment)
    assert replay.exit_code == 0, replay.output
    assert "skipped 3 unreadable record(s)" in replay.output
    with running_worker(flaky.app, settings, concurrency=4):
        wait_for(lambda: all_in(db, [first, second], {"succeeded"}), timeout=60, what="replayed")
    assert flaky.calls[first] == 2 and flaky.calls[second] == 2  # the copy did not run it again
    (row,) = [row for row in audit_rows(db, ["it-unreadable"]) if not row[2]]
    assert row[3] == 6 and row[4] == 2  # matched, replayed
