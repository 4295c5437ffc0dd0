"""What the claims do with a message whose claim missed: a leasable job is never marked done
unless another message owns its wait (the main-topic copy of a job that waits for a retry)."""

from __future__ import annotations

import uuid
from typing import Any

from fakes import DoneOffsets, FakeLane, claims_over, work_item

from tenantq import headers
from tenantq.consumer.ledger import Claim
from tenantq.consumer.work import WorkItem
from tenantq.states import JobState
from tenantq.store.job_store import JobStatus


class Rig:
    """Claims built through their constructor: the offsets they mark done, the operations
    handed to the claims lane, and what goes back to dispatch."""

    def __init__(self) -> None:
        self.done = DoneOffsets()
        self.lane = FakeLane()
        self.pushed: list[WorkItem] = []
        self.published: list[Any] = []
        self.claims = claims_over(
            self.lane, self.done, push=self.pushed.append, publish=self.published.extend
        )


def decide(
    state: JobState, due: bool, tier: int | None, owner: str | None = None
) -> tuple[bool, bool]:
    """(marked done, parked) for one message."""
    job_id = uuid.uuid4()
    status = JobStatus(job_id, state, owner, 1, 3, due, False, None, 0.0)
    rig = Rig()
    rig.claims._sort_out([work_item(job_id=job_id, tier=tier)], {job_id: status})
    return bool(rig.done), bool(rig.claims.parked)


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
    rig = Rig()
    rig.claims._sort_out([work_item(job_id=job_id)], {job_id: status})
    (settle,) = rig.lane.submitted
    assert settle.rows[0].bury == [job_id] and not rig.done
    ((_, error_class, _),) = settle.context[1]
    assert error_class == "PoisonJob"


def test_a_job_id_of_another_deployment_is_dead_lettered_as_a_conflict() -> None:
    # Forged or misrouted: the id is another deployment's job on the shared database. Not
    # done quietly (as a terminal job would be), not claimed again: dead-lettered, with why.
    job_id = uuid.uuid4()
    rig = Rig()
    for tier in (None, 0):
        status = JobStatus.in_another_deployment(job_id)
        rig.claims._sort_out([work_item(job_id=job_id, tier=tier)], {job_id: status})
    letters = [(outgoing.headers, source) for outgoing, source in rig.published]
    assert len(letters) == 2
    for letter_headers, source in letters:
        found = dict(letter_headers)
        assert found[headers.ERROR_CLASS] == b"JobConflict"
        assert b"another deployment" in found[headers.ERROR_MESSAGE]
        assert source.offset == 5
    assert not rig.done and not rig.claims.parked and not rig.lane.submitted


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
    rig = Rig()
    items = [work_item(), work_item(tier=0)]
    assert rig.claims.claimed(Claim([], context=items)) == []
    assert not rig.done and rig.claims.parked == items


def test_two_messages_of_one_job_in_a_round_are_claimed_one_at_a_time() -> None:
    # The second goes back to dispatch (and gives its slot back), judged in the next round
    # once this one has decided the first.
    rig = Rig()
    first = work_item()
    second = work_item(job_id=first.job_id, tier=0)
    rig.claims.claim([first, second])
    (claim,) = rig.lane.submitted
    assert claim.context == [first] and rig.pushed == [second]
