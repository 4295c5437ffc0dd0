"""Helpers of the DLQ scenarios: an app whose handler fails permanently until "the fix" is
deployed (a flag flips), and a way to fill the DLQ through a real worker."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import psycopg
from support import all_in, end_offsets, running_worker, wait_for

import tenantq
from tenantq.topics import dlq_topic


class CardDeclined(tenantq.PermanentError):
    """A permanent failure with a class of its own, for error-class filters."""


class FlakyApp:
    """Job types ``charge`` and ``export``: a payload with ``"fail": true`` raises a permanent
    error until ``fixed`` is set. Every run is counted per job, with the replay count seen."""

    def __init__(self, settings: tenantq.Settings) -> None:
        self.app = tenantq.App(settings)
        self.fixed = threading.Event()
        self.calls: Counter[uuid.UUID] = Counter()
        self.replays_seen: dict[uuid.UUID, int] = {}
        self._lock = threading.Lock()
        for job_type in ("charge", "export"):
            self.app.job(job_type, max_attempts=3)(self._handler)

    def _handler(self, ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        with self._lock:
            self.calls[ctx.job_id] += 1
            self.replays_seen[ctx.job_id] = ctx.replays
        if payload.get("fail") and not self.fixed.is_set():
            if payload.get("declined"):
                raise CardDeclined("card declined")
            raise tenantq.PermanentError("downstream rejected the request")

    def call_count(self) -> int:
        with self._lock:
            return sum(self.calls.values())


def dlq_size(settings: tenantq.Settings, queue: str = "default") -> int:
    return sum(end_offsets(settings, dlq_topic(settings.topic_prefix, queue)).values())


def failing_charges(count: int) -> list[dict[str, Any]]:
    """``count`` charge jobs of tenant acme that fail permanently until the fix (``fill_dlq``
    input); each payload differs, so each is a job of its own."""
    return [
        {"job_type": "charge", "tenant": "acme", "payload": {"fail": True, "i": i}}
        for i in range(count)
    ]


def fill_dlq(
    flaky: FlakyApp,
    settings: tenantq.Settings,
    db: psycopg.Connection[Any],
    jobs: list[dict[str, Any]],
) -> list[uuid.UUID]:
    """Enqueue ``jobs`` (enqueue keyword arguments), run a worker until each failing one is
    dead in Postgres and in the DLQ and the others succeeded; returns the job ids in order."""
    with tenantq.Producer(settings, flaky.app) as producer:
        ids = [producer.enqueue(**job).result(30).job_id for job in jobs]
    failing = [i for i, job in zip(ids, jobs, strict=True) if job["payload"].get("fail")]
    passing = [i for i in ids if i not in failing]
    before = dlq_size(settings)
    with running_worker(flaky.app, settings, concurrency=4):
        wait_for(lambda: all_in(db, failing, {"dead"}), timeout=60, what="failing jobs dead")
        wait_for(lambda: all_in(db, passing, {"succeeded"}), timeout=60, what="others done")
        wait_for(lambda: dlq_size(settings) == before + len(failing), timeout=30, what="DLQ")
    return ids


def audit_rows(db: psycopg.Connection[Any], actors: list[str]) -> list[tuple[Any, ...]]:
    """(actor, action, dry_run, matched, replayed, job ids, filter) of each audit row by these
    actors (the database is shared by the session's tests: each test uses actors of its own)."""
    return db.execute(
        "SELECT actor, action, dry_run, matched, replayed, job_ids, filter "
        "FROM tenantq_replay_audit WHERE actor = ANY(%s) ORDER BY id",
        (actors,),
    ).fetchall()
