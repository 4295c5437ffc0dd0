"""Results are written in batches that grow with the load: while the results lane writes,
the completions that come in are gathered for its next statement; idle, each goes at once;
at shutdown or revoke, everything goes now."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fakes import make_settings

from tenantq.consumer.completer import Completer, Completion, _result
from tenantq.consumer.intake import Polled
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.work import WorkItem
from tenantq.schemas.envelope import Envelope
from tenantq.states import JobState
from tenantq.store.job_store import Lease
from tenantq.topic_admin import queue_topics


class ResultsLane:
    def __init__(self) -> None:
        self.pending = 0
        self.statements: list[list[uuid.UUID]] = []

    def submit(self, operation: Any) -> None:
        self.pending += 1
        self.statements.append([row.job_id for row in operation.rows])


def completion() -> Completion:
    now = dt.datetime.now(dt.UTC)
    envelope = Envelope(uuid.uuid4(), "default", "t", "acme", "acme", b"{}", now)
    record = Polled("unit.default", 0, 5, b"acme", b"x", [], 0)
    item = WorkItem("unit.default", 0, 5, b"acme", b"x", record, None, "default", envelope, 3)
    item.lease = Lease(envelope.job_id, 1, 3, None, 0, True, now, now)
    return Completion(item, Verdict.succeeded(), 0.01)


def completer(tmp_path: Path, lane: ResultsLane) -> Completer:
    settings = make_settings(tmp_path)
    return Completer(
        settings=settings,
        topics={"default": queue_topics(settings, "default")},
        worker_id="w",
        publisher=SimpleNamespace(publish=lambda outgoing: [True] * len(outgoing)),  # type: ignore[arg-type]
        ledger=SimpleNamespace(results=lane),  # type: ignore[arg-type]
        events=SimpleNamespace(),  # type: ignore[arg-type]
        release_holds=lambda job_ids: set(),
        mark_done=lambda items: None,
        completing=lambda completions: None,
        stats={},
    )


def test_an_idle_lane_gets_each_completion_at_once(tmp_path: Path) -> None:
    lane = ResultsLane()
    results = completer(tmp_path, lane)
    first = completion()
    results.add(first)
    results.flush()
    assert lane.statements == [[first.item.job_id]]
    assert results.waiting == 0


def test_a_busy_lane_gets_what_came_in_meanwhile_in_one_statement(tmp_path: Path) -> None:
    lane = ResultsLane()
    results = completer(tmp_path, lane)
    results.add(completion())
    results.flush()
    later = [completion() for _ in range(3)]
    for each in later:
        results.add(each)
        results.flush()  # the first statement is still running: gathered
    assert len(lane.statements) == 1
    assert results.waiting == 3
    lane.pending = 0  # it answered
    results.flush()
    assert lane.statements[1] == [each.item.job_id for each in later]
    assert results.waiting == 0


def test_now_hands_everything_over_even_to_a_busy_lane(tmp_path: Path) -> None:
    lane = ResultsLane()
    results = completer(tmp_path, lane)
    lane.pending = 1
    results.add(completion())
    results.flush()
    assert lane.statements == []
    results.flush(now=True)
    assert len(lane.statements) == 1


def test_a_result_row_carries_each_field_by_name() -> None:
    # ``_result`` builds the tuple in field order: a field out of place fails here.
    done = completion()
    done.verdict = Verdict.retrying("Boom", "it broke", 2.5)
    done.duration = 0.25
    lease = done.item.lease
    assert lease is not None
    assert _result(done)._asdict() == {
        "job_id": done.item.job_id,
        "attempt": 1,
        "outcome": done.verdict.outcome,
        "state": JobState.RETRYING,
        "error_class": "Boom",
        "error_message": "it broke",
        "delay_seconds": 2.5,
        "give_back": False,
        "duration_ms": 250,
        "started_at": lease.claimed_at,
    }
