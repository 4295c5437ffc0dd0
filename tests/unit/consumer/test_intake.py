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


def test_a_job_id_of_another_deployment_is_dead_lettered_as_a_conflict() -> None:
    # Forged or misrouted: the id is another deployment's job on the shared database. Not
    # done quietly (as a terminal job would be), not claimed again: dead-lettered, with why.
    job_id = uuid.uuid4()
    worker = FakeIntakeWorker()
    intake = Intake(worker)  # type: ignore[arg-type]
    letters: list[tuple[list[uuid.UUID], str, str]] = []

    def dead_letter(items: list[WorkItem], error_class: str, message: str) -> None:
        if items:
            letters.append(([entry.job_id for entry in items], error_class, message))

    intake._dead_letter_items = dead_letter  # type: ignore[method-assign]
    for tier in (None, 0):
        status = JobStatus.in_another_deployment(job_id)
        intake._sort_out([item(job_id, tier)], {job_id: status})
    assert [(ids, error_class) for ids, error_class, _ in letters] == [
        ([job_id], "JobConflict"),
        ([job_id], "JobConflict"),
    ]
    assert "another deployment" in letters[0][2]
    assert not worker.done_offsets and not intake.parked and not worker.submitted


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


class _Record:
    """A consumed record as confluent-kafka hands it out."""

    def __init__(self, topic: str, offset: int, value: bytes, partition: int = 0) -> None:
        self._topic, self._offset, self._value = topic, offset, value
        self._partition = partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"acme"

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000)

    def headers(self) -> None:
        return None


def lane_worker(lane_window: int) -> tuple[FakeIntakeWorker, list[WorkItem], list[str]]:
    """A worker as the intake sees it when taking messages of the hot lane's partition 0:
    real partition bookkeeping; what reaches dispatch and each pause and resume recorded."""
    from types import SimpleNamespace

    from confluent_kafka import TopicPartition

    from tenantq.consumer.partitions import Partitions

    lane = "p.default.lane"
    worker = FakeIntakeWorker()
    dispatched: list[WorkItem] = []
    calls: list[str] = []
    worker.partitions = Partitions(1_000, lane_window, frozenset({lane}))  # type: ignore[assignment]
    worker.partitions.assigned([TopicPartition(lane, 0), TopicPartition(lane, 1)])  # type: ignore[attr-defined]
    worker.lane_topics = frozenset({lane})  # type: ignore[attr-defined]
    worker.queue_of_topic = {lane: ("default", None)}  # type: ignore[attr-defined]
    worker.app = SimpleNamespace(find=lambda name: None)  # type: ignore[attr-defined]
    worker.dispatcher = SimpleNamespace(push=dispatched.append)  # type: ignore[attr-defined]
    worker.consumer = SimpleNamespace(  # type: ignore[attr-defined]
        pause=lambda parts: calls.append("pause"), resume=lambda parts: calls.append("resume")
    )
    return worker, dispatched, calls


def lane_records(count: int, partition: int = 0, tenant: str = "acme") -> list[_Record]:
    from tenantq.schemas.envelope import encode_envelope

    now = dt.datetime.now(dt.UTC)
    return [
        _Record(
            "p.default.lane",
            offset,
            encode_envelope(Envelope(uuid.uuid4(), "default", "t", tenant, tenant, b"{}", now)),
            partition,
        )
        for offset in range(count)
    ]


def test_lane_messages_past_the_window_wait_undecoded_until_room() -> None:
    worker, dispatched, calls = lane_worker(lane_window=3)
    intake = Intake(worker)  # type: ignore[arg-type]
    intake.take(lane_records(5))  # type: ignore[arg-type]
    # Three fill the window; two are held, and the partition stops flowing.
    assert [item.offset for item in dispatched] == [0, 1, 2]
    assert [message.offset for _, message in intake.waiting[("p.default.lane", 0)]] == [3, 4]
    assert calls == ["pause"]
    intake.route_due()
    assert len(dispatched) == 3  # still no room
    partitions = worker.partitions
    partitions.done("p.default.lane", 0, 0, 1)  # type: ignore[call-arg]
    intake.route_due()
    assert [item.offset for item in dispatched] == [0, 1, 2, 3] and calls == ["pause"]
    partitions.done("p.default.lane", 0, 1, 1)  # type: ignore[call-arg]
    intake.route_due()
    assert [item.offset for item in dispatched] == [0, 1, 2, 3, 4]
    assert calls == ["pause", "resume"] and not intake.waiting
    # The commit position stayed at the first unfinished message all along.
    assert partitions.states[("p.default.lane", 0)].offsets.commit_position == 2  # type: ignore[attr-defined]


def test_a_window_with_room_routes_every_lane_message() -> None:
    worker, dispatched, calls = lane_worker(lane_window=100)
    read: list[list[tuple[str, str, float]]] = []
    worker.events.messages_read = read.append  # type: ignore[method-assign,assignment]
    intake = Intake(worker)  # type: ignore[arg-type]
    intake.take(lane_records(5))  # type: ignore[arg-type]
    assert len(dispatched) == 5 and not intake.waiting and calls == []
    # One report per poll: each message's queue, its source (these are lane records) and its
    # time since the Kafka timestamp (the records say 1 s after the epoch).
    assert len(read) == 1 and [(q, s) for q, s, _ in read[0]] == [("default", "hot_lane")] * 5
    assert all(delay > 1.7e9 for _, _, delay in read[0])


def test_a_flooded_partition_of_a_poll_is_taken_after_the_others() -> None:
    # 100 messages of partition 0 (a flood being read) around 2 of partition 1: those 2 reach
    # dispatch, and the worker's dispatch runs, before any of the flood is decoded.
    worker, dispatched, _ = lane_worker(lane_window=1_000)
    intake = Intake(worker)  # type: ignore[arg-type]
    flood = lane_records(100, partition=0, tenant="whale")
    quiet = lane_records(2, partition=1, tenant="acme")
    seen_at_dispatch: list[list[str]] = []
    intake.take(
        flood[:50] + quiet[:1] + flood[50:] + quiet[1:],  # type: ignore[arg-type]
        between=lambda: seen_at_dispatch.append([item.tenant_id for item in dispatched]),
    )
    assert seen_at_dispatch == [["acme", "acme"]]
    assert [item.offset for item in dispatched if item.tenant_id == "whale"] == list(range(100))
    assert len(dispatched) == 102


def test_a_poll_without_a_flood_is_taken_in_one_pass() -> None:
    worker, dispatched, _ = lane_worker(lane_window=1_000)
    intake = Intake(worker)  # type: ignore[arg-type]
    calls: list[int] = []
    intake.take(
        lane_records(40, partition=0) + lane_records(40, partition=1),  # type: ignore[arg-type]
        between=lambda: calls.append(len(dispatched)),
    )
    assert calls == [] and len(dispatched) == 80
