"""Pending rows of scheduled jobs survive a database that is away: they are kept and written
once it is back, tried again with a growing pause (not on every poll), and a refusal of the
rows themselves drops them without a crash (their jobs get rows when due)."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fakes import FakeKafkaProducer, FakeMessage, make_settings

from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer import pending_rows
from tenantq.producer.pending_rows import PendingRecorder
from tenantq.producer.producer import Producer
from tenantq.schemas.envelope import Envelope, encode_envelope


def scheduled(tenant: str) -> FakeMessage:
    now = dt.datetime.now(dt.UTC)
    envelope = Envelope(uuid.uuid4(), "default", "mail", tenant, tenant, b"{}", now, run_after=now)
    return FakeMessage("unit.default.retry.0", 0, 1, encode_envelope(envelope))


class Database:
    """What ``connect`` returns: down until ``up`` is set; records what was inserted."""

    def __init__(self) -> None:
        self.up = False
        self.refuse = False
        self.inserted: list[int] = []

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        if not self.up:
            raise psycopg.OperationalError("connection refused")
        return self

    closed = False

    def close(self) -> None:
        pass

    def insert(self, connection: Any, rows: Any, run_afters: Any) -> int:
        if self.refuse:
            raise psycopg.DataError("value out of range")
        self.inserted.append(len(rows))
        return len(rows)


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch) -> Database:
    found = Database()
    monkeypatch.setattr(pending_rows, "connect", found.connect)
    monkeypatch.setattr(pending_rows, "insert_pending", found.insert)
    return found


def test_rows_are_kept_while_the_database_is_away(tmp_path: Path, database: Database) -> None:
    recorder = PendingRecorder(make_settings(tmp_path), None)
    recorder.acknowledged(None, scheduled("acme"))
    recorder.acknowledged(None, scheduled("globex"))
    assert recorder.write() == 0
    assert recorder.write() == 0  # within the pause: not even tried
    database.up = True
    assert recorder.write() == 0  # still within the pause
    assert recorder.write(now_or_never=True) == 2
    assert database.inserted == [2]


def test_a_refused_batch_is_dropped_without_a_crash(tmp_path: Path, database: Database) -> None:
    database.up, database.refuse = True, True
    recorder = PendingRecorder(make_settings(tmp_path), None)
    recorder.acknowledged(None, scheduled("acme"))
    assert recorder.write() == 0
    database.refuse = False
    # Past any pause: rows kept as if the database were away would be written now.
    assert recorder.write(now_or_never=True) == 0  # nothing left: the refused rows were not kept
    assert database.inserted == []


def test_a_scheduled_job_acknowledged_without_an_offset_gets_one_row_of_the_offset_kafka_gave(
    tmp_path: Path, database: Database
) -> None:
    database.up = True
    kafka = FakeKafkaProducer()
    kafka.unconfirmed = {0}
    settings = make_settings(tmp_path, database_url="postgresql://nobody@127.0.0.1:1/none")
    with Producer(settings, placement_book=PlacementBook(None, 1), kafka_client=kafka) as made:
        scheduled_ref = made.enqueue("resize", tenant="acme", payload={}, delay=30).result(5)
        now_ref = made.enqueue("resize", tenant="acme", payload={}).result(5)
    # Sent twice (the first report had no offset), acknowledged once, with the offset; the job
    # that runs now gets no row.
    assert [sent["value"] for sent in kafka.produced[:2]] == [kafka.produced[0]["value"]] * 2
    assert scheduled_ref.offset == 1 and now_ref.topic == "unit.default"
    assert sum(database.inserted) == 1
