"""What the intake does with a message whose claim missed: a leasable job is never marked done
unless another message owns its wait (the main-topic copy of a job that waits for a retry)."""

from __future__ import annotations

import datetime as dt
import uuid

from fakes import FakeIntakeWorker, FakeJobStore
from tenantq.consumer.intake import Intake
from tenantq.consumer.work import WorkItem
from tenantq.schemas.envelope import Envelope
from tenantq.states import JobState
from tenantq.store.job_store import JobStatus


def item(job_id: uuid.UUID, tier: int | None) -> WorkItem:
    envelope = Envelope(job_id, "default", "t", "acme", "acme", b"{}", dt.datetime.now(dt.UTC))
    topic = "p.default" if tier is None else f"p.default.retry.{tier}"
    return WorkItem(topic, 0, 5, b"acme", b"x", [], None, "default", envelope, 3, tier=tier)


def decide(state: JobState, due: bool, tier: int | None) -> tuple[bool, bool]:
    """(marked done, parked) for one message."""
    job_id = uuid.uuid4()
    status = JobStatus(job_id, state, None, 1, 3, due, False, None, 0.0)
    recorder = FakeJobStore(status)
    intake = Intake(FakeIntakeWorker(recorder))  # type: ignore[arg-type]
    intake._sort_out([item(job_id, tier)])
    return bool(recorder.done), bool(intake.parked)


def test_retry_message_due_but_unclaimed_is_claimed_again() -> None:
    assert decide(JobState.RETRYING, due=True, tier=1) == (False, True)


def test_retry_message_not_yet_due_waits() -> None:
    assert decide(JobState.RETRYING, due=False, tier=0) == (False, True)


def test_main_copy_of_a_waiting_job_is_done() -> None:
    assert decide(JobState.RETRYING, due=False, tier=None) == (True, False)


def test_main_copy_of_a_due_job_is_claimed_again() -> None:
    assert decide(JobState.RUNNABLE, due=True, tier=None) == (False, True)


def test_terminal_job_is_done() -> None:
    assert decide(JobState.SUCCEEDED, due=True, tier=1) == (True, False)
