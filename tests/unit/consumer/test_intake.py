"""What the intake does with a message whose claim missed: a leasable job is never marked done
unless another message owns its wait (the main-topic copy of a job that waits for a retry)."""

from __future__ import annotations

import datetime as dt
import uuid

from fakes import FakeIntakeWorker
from tenantq.consumer.intake import Intake, Polled
from tenantq.consumer.work import WorkItem
from tenantq.schemas.envelope import Envelope
from tenantq.states import JobState
from tenantq.store.job_store import JobStatus


def item(job_id: uuid.UUID, tier: int | None) -> WorkItem:
    envelope = Envelope(job_id, "default", "t", "acme", "acme", b"{}", dt.datetime.now(dt.UTC))
    topic = "p.default" if tier is None else f"p.default.retry.{tier}"
    record = Polled(topic, 0, 5, b"acme", b"x", [], 0)
    return WorkItem(topic, 0, 5, b"acme", b"x", record, None, "default", envelope, 3, tier=tier)


def decide(
    state: JobState, due: bool, tier: int | None, owner: str | None = None
) -> tuple[bool, bool]:
    """(marked done, parked) for one message."""
    job_id = uuid.uuid4()
    status = JobStatus(job_id, state, owner, 1, 3, due, False, None, 0.0)
    worker = FakeIntakeWorker()
    intake = Intake(worker)  # type: ignore[arg-type]
    intake._sort_out([item(job_id, tier)], {job_id: status})
    return bool(worker.done_offsets), bool(intake.parked)


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


def test_job_past_its_crash_budget_is_buried_as_poison() -> None:
    job_id = uuid.uuid4()
    status = JobStatus(job_id, JobState.RUNNABLE, None, 1, 3, True, False, None, 0.0, crashes=3)
    worker = FakeIntakeWorker()
    intake = Intake(worker)  # type: ignore[arg-type]
    intake._sort_out([item(job_id, None)], {job_id: status})
    (settle,) = worker.submitted
    assert settle.rows[0].bury == [job_id] and not worker.done_offsets
    ((_, error_class, _),) = settle.context[1]
    assert error_class == "PoisonJob"


def test_main_copy_of_a_job_running_here_is_done() -> None:
    assert decide(JobState.LEASED, due=True, tier=None, owner="this-worker") == (True, False)


def test_retry_message_of_a_job_still_leased_here_waits_for_its_result() -> None:
    # The worker published the retry, and its result of the attempt ("retrying") is not
    # written yet: the retry message is the only thing left to run the job.
    assert decide(JobState.LEASED, due=False, tier=0, owner="this-worker") == (False, True)


def test_retry_message_of_a_job_leased_elsewhere_waits_for_the_lease() -> None:
    assert decide(JobState.LEASED, due=False, tier=0, owner="another-worker") == (False, True)


def test_a_claim_the_ledger_never_ran_marks_nothing_done() -> None:
    # Handed back unrun (the lane stopped during an outage backoff): nothing is known of
    # the jobs, so none may be taken for a duplicate and marked done.
    from tenantq.consumer.ledger import Claim

    worker = FakeIntakeWorker()
    intake = Intake(worker)  # type: ignore[arg-type]
    items = [item(uuid.uuid4(), None), item(uuid.uuid4(), 0)]
    assert intake.claimed(Claim([], context=items)) == []
    assert not worker.done_offsets and intake.parked == items
