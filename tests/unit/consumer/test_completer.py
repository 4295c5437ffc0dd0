"""Results are written in batches that grow with the load: while the results lane writes,
the completions that come in are gathered for its next statement; idle, each goes at once;
at shutdown or revoke, everything goes now."""

from __future__ import annotations

import uuid
from pathlib import Path

from fakes import FakeLane, completer_over, work_item

from tenantq.consumer.completer import Completer, Completion, _result
from tenantq.consumer.outcomes import Verdict
from tenantq.states import JobState


def completion() -> Completion:
    return Completion(work_item(attempt=1), Verdict.succeeded(), 0.01)


def statements(lane: FakeLane) -> list[list[uuid.UUID]]:
    """The job ids of each statement handed to the results lane."""
    return [[row.job_id for row in operation.rows] for operation in lane.submitted]


def completer(tmp_path: Path, lane: FakeLane) -> Completer:
    return completer_over(tmp_path, lane)


def test_an_idle_lane_gets_each_completion_at_once(tmp_path: Path) -> None:
    lane = FakeLane()
    results = completer(tmp_path, lane)
    first = completion()
    results.add(first)
    results.flush()
    assert statements(lane) == [[first.item.job_id]]
    assert results.waiting == 0


def test_a_busy_lane_gets_what_came_in_meanwhile_in_one_statement(tmp_path: Path) -> None:
    lane = FakeLane()
    results = completer(tmp_path, lane)
    results.add(completion())
    results.flush()
    later = [completion() for _ in range(3)]
    for each in later:
        results.add(each)
        results.flush()  # the first statement is still running: gathered
    assert len(statements(lane)) == 1
    assert results.waiting == 3
    lane.pending = 0  # it answered
    results.flush()
    assert statements(lane)[1] == [each.item.job_id for each in later]
    assert results.waiting == 0


def test_now_hands_everything_over_even_to_a_busy_lane(tmp_path: Path) -> None:
    lane = FakeLane()
    results = completer(tmp_path, lane)
    lane.pending = 1
    results.add(completion())
    results.flush()
    assert statements(lane) == []
    results.flush(now=True)
    assert len(statements(lane)) == 1


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
