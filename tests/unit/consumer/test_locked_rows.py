"""Guarantee: a job whose row another transaction holds (an operator's ``SELECT ... FOR
UPDATE``) holds up nothing else. Its result, set aside by the store, keeps its lease and its
offset, is not taken for stale, and is written again after a pause that grows to a second,
while the other results of its batch are settled; its claim, skipped, is tried again a second
later with nothing decided (not done, not canceled, not buried)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fakes import DoneOffsets, FakeLane, claims_over, completer_over, work_item

from tenantq.consumer import completer as completer_module
from tenantq.consumer.claims import LOCKED_RECHECK_SECONDS, Claims
from tenantq.consumer.completer import Completer, Completion
from tenantq.consumer.ledger import Complete
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.states import JobState
from tenantq.store.job_store import Completed, JobStatus


class Recorder:
    """What the completer reported: leases released, offsets done, stale results."""

    def __init__(self) -> None:
        self.released: list[uuid.UUID] = []
        self.done = DoneOffsets()
        self.stale: list[str] = []

    def release_holds(self, job_ids: list[uuid.UUID]) -> set[uuid.UUID]:
        self.released += job_ids
        return set()


class StaleEvents(WorkerEvents):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def stale_result_refused(self, queue: str) -> None:
        self._recorder.stale.append(queue)


def make_completer(tmp_path: Path, lane: FakeLane, recorder: Recorder) -> Completer:
    return completer_over(
        tmp_path,
        lane,
        events=StaleEvents(recorder),
        release_holds=recorder.release_holds,
        done=recorder.done,
        stats={"succeeded": 0, "stale_refused": 0},
    )


def rows(lane: FakeLane, n: int) -> list[uuid.UUID]:
    return [row.job_id for row in lane.submitted[n].rows]


def answer(lane: FakeLane, n: int, applied: set[uuid.UUID], locked: set[uuid.UUID]) -> Complete:
    """Statement ``n`` of the lane, answered."""
    operation: Complete = lane.submitted[n]
    operation.answer = Completed(applied, locked)
    lane.pending = 0
    return operation


def offsets(*items: Any) -> list[tuple[str, int, int]]:
    return [(item.topic, item.partition, item.offset) for item in items]


def test_a_locked_result_is_set_aside_and_written_again_after_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(completer_module.time, "monotonic", lambda: clock[0])
    lane, recorder = FakeLane(), Recorder()
    results = make_completer(tmp_path, lane, recorder)
    held, free = work_item(attempt=1, offset=5), work_item(attempt=1, offset=6)
    for item in (held, free):
        results.add(Completion(item, Verdict.succeeded(), 0.01))
    results.flush()
    assert rows(lane, 0) == [held.job_id, free.job_id]

    results.applied(answer(lane, 0, {free.job_id}, {held.job_id}))
    # The other result is settled; the locked one keeps its lease and its offset.
    assert recorder.done == offsets(free)
    assert recorder.released == [free.job_id]
    assert recorder.stale == []
    assert results.waiting == 1

    results.flush()
    assert len(lane.submitted) == 1  # not before its pause
    clock[0] += completer_module.SET_ASIDE_FIRST_SECONDS
    results.flush()
    assert rows(lane, 1) == [held.job_id]

    # Still locked: the pause doubles, up to its cap.
    pauses = []
    for n in range(1, 8):
        results.applied(answer(lane, n, set(), {held.job_id}))
        waited = 0.0
        while len(lane.submitted) == n + 1:
            clock[0] += 0.01
            waited += 0.01
            results.flush()
        pauses.append(round(waited, 2))
    assert pauses == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0], abs=0.011)
    assert recorder.done == offsets(free)

    results.applied(answer(lane, -1, {held.job_id}, set()))
    assert recorder.done == offsets(free, held)
    assert recorder.stale == []
    assert results.waiting == 0


def one_success_not_applied(
    tmp_path: Path, *, locked: bool
) -> tuple[Completer, FakeLane, Recorder, WorkItem]:
    """A completer that wrote one success and heard back that it was not applied: its row
    locked by another transaction (``locked``), or its lease gone."""
    lane, recorder = FakeLane(), Recorder()
    results = make_completer(tmp_path, lane, recorder)
    item = work_item(attempt=1)
    results.add(Completion(item, Verdict.succeeded(), 0.01))
    results.flush()
    results.applied(answer(lane, 0, set(), {item.job_id} if locked else set()))
    return results, lane, recorder, item


def test_shutdown_hands_over_a_set_aside_result_at_once(tmp_path: Path) -> None:
    results, lane, _, held = one_success_not_applied(tmp_path, locked=True)
    results.flush(now=True)
    assert rows(lane, 1) == [held.job_id]


def test_a_result_neither_applied_nor_locked_is_stale(tmp_path: Path) -> None:
    results, _, recorder, _ = one_success_not_applied(tmp_path, locked=False)
    assert recorder.stale == ["default"]
    assert results.waiting == 0


def claims(done: DoneOffsets, lane: FakeLane) -> Claims:
    return claims_over(lane, done)


@pytest.mark.parametrize(
    ("state", "due", "tier", "cancel", "attempts"),
    [
        (JobState.RETRYING, True, 0, False, 1),  # a due retry: would be claimed again at once
        (JobState.RUNNABLE, True, None, True, 1),  # asked to cancel: would be canceled
        (JobState.RETRYING, True, 0, False, 3),  # attempts used up: would be buried
    ],
)
def test_a_locked_job_is_parked_with_nothing_decided(
    state: JobState, due: bool, tier: int | None, cancel: bool, attempts: int
) -> None:
    item = work_item(tier=tier)
    status = JobStatus(item.job_id, state, None, attempts, 3, due, cancel, None, 0.0, locked=True)
    done, lane = DoneOffsets(), FakeLane()
    rig = claims(done, lane)
    before = time.monotonic()
    rig._sort_out([item], {item.job_id: status})
    assert not done
    assert rig.parked == [item]
    assert item.retry_claim_at >= before + LOCKED_RECHECK_SECONDS
    assert lane.submitted == []  # nothing settled (canceled, buried) while locked


def test_a_locked_job_already_finished_is_done() -> None:
    item = work_item(tier=0)
    status = JobStatus(
        item.job_id, JobState.SUCCEEDED, None, 1, 3, True, False, None, 0.0, locked=True
    )
    done = DoneOffsets()
    rig = claims(done, FakeLane())
    rig._sort_out([item], {item.job_id: status})
    assert done == offsets(item)
    assert not rig.parked
