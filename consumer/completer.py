"""From verdicts to durable results: the part of the worker that completes jobs.

A verdict (from a finished attempt, or decided without running) becomes a ``Completion``. Its
next step goes to Kafka first — a retry into the tier that covers its wait, a dead letter into
the DLQ — and only once Kafka holds it is the result written to Postgres, fenced by (job,
attempt, owner), through the ledger's results lane. Only when Postgres answers is the job's
offset done: a crash at any point leaves the message to be read again, never a job without
its next step. While the database is away, completions wait in the lane, already published
(never published twice). A result whose job row another transaction holds (an operator's
``SELECT ... FOR UPDATE``) is set aside by the store rather than waited for, and written again
after a pause that grows to ``SET_ASIDE_MAX_SECONDS``; the other results go through.

Everything here runs on the poll thread.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from tenantq.consumer.attempt_trace import trace_stale
from tenantq.consumer.ledger import Complete, OperationLane
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.work import WorkItem
from tenantq.headers import DelayReason
from tenantq.log import job_fields, log_event
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Outgoing, retry_message
from tenantq.settings import Settings
from tenantq.states import JobState, Outcome
from tenantq.store.job_store import Result
from tenantq.topics import QueueTopics

log = logging.getLogger("tenantq.worker")

#: First and longest pause before a result set aside (its job's row locked) is written again.
SET_ASIDE_FIRST_SECONDS = 0.05
SET_ASIDE_MAX_SECONDS = 1.0


@dataclass(eq=False, slots=True)
class Completion:
    """A verdict waiting to be made durable."""

    item: WorkItem
    verdict: Verdict
    duration: float
    #: Times its result was set aside because its job's row was locked.
    set_asides: int = 0


@dataclass(eq=False, kw_only=True)
class Completer:
    """Publishes next steps, writes results, and settles what the database answered."""

    settings: Settings
    topics: dict[str, QueueTopics]
    worker_id: str
    #: Send to Kafka and wait; per message, whether Kafka acknowledged it.
    publish: Callable[[Sequence[Outgoing]], list[bool]]
    #: The ledger's results lane.
    results: OperationLane
    events: WorkerEvents
    #: Forget the jobs' leases; returns those whose loss was reported already (expiries).
    release_holds: Callable[[list[uuid.UUID]], AbstractSet[uuid.UUID]]
    #: Their messages are durably handled (offsets may move past them).
    mark_done: Callable[[list[WorkItem]], None]
    #: Told of completions handed to the database: from then on a lease the heartbeat
    #: finds gone was completed, not lost.
    completing: Callable[[Iterable[uuid.UUID]], None]
    stats: dict[str, int]
    #: Completions whose next step Kafka has not acknowledged yet.
    _unpublished: list[Completion] = field(default_factory=list, init=False)
    #: Completions ready for the database, gathered while the results lane is busy.
    _gathered: list[Completion] = field(default_factory=list, init=False)
    #: (when to write it again, completion) of results set aside, their job row locked.
    _set_aside: list[tuple[float, Completion]] = field(default_factory=list, init=False)

    @property
    def waiting(self) -> int:
        """Completions not yet handed to the database."""
        return len(self._unpublished) + len(self._gathered) + len(self._set_aside)

    @property
    def unpublished(self) -> int:
        """Completions whose next step is not acknowledged yet (work for the next flush)."""
        return len(self._unpublished)

    def add(self, completion: Completion) -> None:
        self._unpublished.append(completion)

    def flush(self, *, now: bool = False) -> None:
        """Publish the next steps waiting, then hand the completions whose next step Kafka
        holds to the results lane. What Kafka did not take waits for the next flush.

        While the lane is writing, completions are gathered and go in its next statement: the
        busier the worker, the fewer and larger its writes, at no cost when it is idle.
        ``now`` (shutdown, revoke) hands everything over at once."""
        self._publish_next_steps()
        if self._set_aside:
            self._take_back_set_aside(now)
        if self._gathered and (now or not self.results.pending):
            gathered, self._gathered = self._gathered, []
            self.write(gathered)

    def _take_back_set_aside(self, now: bool) -> None:
        """Results set aside whose pause is over (all of them, ``now``) join the next write."""
        clock = time.monotonic()
        due = [c for at, c in self._set_aside if now or at <= clock]
        if due:
            self._set_aside = [(at, c) for at, c in self._set_aside if not now and at > clock]
            self._gathered.extend(due)

    def _publish_next_steps(self) -> None:
        if not self._unpublished:
            return
        batch, self._unpublished = self._unpublished, []
        outgoing: list[Outgoing] = []
        # (position in the batch, index in outgoing) of the completions with a next step.
        needs_ack: list[tuple[int, int]] = []
        for position, completion in enumerate(batch):
            message = self._next_step(completion)
            if message is not None:
                needs_ack.append((position, len(outgoing)))
                outgoing.append(message)
        acknowledged = self.publish(outgoing)
        not_taken: set[int] = set()
        for position, index in needs_ack:
            if not acknowledged[index]:
                # Kafka did not take the next step: keep the lease and try again.
                not_taken.add(position)
                self._unpublished.append(batch[position])
        self._gathered.extend(c for position, c in enumerate(batch) if position not in not_taken)

    def write(self, completions: list[Completion]) -> None:
        """Hand completions whose next step is settled to the results lane."""
        if not completions:
            return
        self.completing(completion.item.job_id for completion in completions)
        self.results.submit(
            Complete([_result(completion) for completion in completions], context=completions)
        )

    def release(self, items: Iterable[WorkItem], reason: str) -> None:
        """Give leases back (shutdown, revoke): the job is runnable again, attempt returned.
        A release has no next step: straight to the database."""
        self.write(
            [
                Completion(item, Verdict.released(reason), 0.0)
                for item in items
                if item.lease is not None
            ]
        )

    def applied(self, operation: Complete) -> None:
        """The results lane answered: account for every completion of the operation.

        One pass for the whole statement (a few hundred jobs under load): the leases are
        released under one lock, the metrics recorded in one call, the offsets marked in
        one, the log level looked at once."""
        completions: list[Completion] = operation.context
        if operation.answer is None:
            # Never written (stopping, or a fault it logged): the jobs keep their leases until
            # these run out, and their offsets stay unfinished, so they run again.
            self.release_holds([completion.item.job_id for completion in completions])
            log.error("%d result(s) not written; their jobs run again", len(completions))
            return
        applied, locked = operation.answer
        if locked:
            completions = self._put_aside(completions, locked)
        retry: list[Completion] = []
        if operation.refused:
            # A result the database refused (it never should: its text is made printable) is
            # written again as the job's death with the reason, so nothing stays leased.
            refused = {result.job_id: reason for result, reason in operation.refused}
            settled = []
            for completion in completions:
                reason = refused.get(completion.item.job_id)
                if reason is not None and completion.verdict.error_class != "ResultRefused":
                    retry.append(_refused_result(completion, reason))
                else:
                    settled.append(completion)
            completions = settled
        already_lost = self.release_holds([completion.item.job_id for completion in completions])
        finished: list[tuple[str, str, str, Outcome, float, int]] = []
        done: list[WorkItem] = []
        succeeded = 0
        log_successes = log.isEnabledFor(logging.DEBUG)
        for completion in completions:
            item = completion.item
            verdict = completion.verdict
            if item.job_id not in applied:
                self._stale(item, item.job_id in already_lost)
            else:
                lease = item.lease
                finished.append(
                    (
                        item.queue,
                        item.job_type,
                        item.tenant_id,
                        verdict.outcome,
                        completion.duration,
                        lease.attempt if lease else 0,
                    )
                )
                state = verdict.state
                if state is JobState.SUCCEEDED:
                    succeeded += 1
                    if log_successes:
                        self._log_outcome(completion)
                else:
                    if state is JobState.RETRYING:
                        self.events.retried(
                            item.queue, item.job_type, verdict.error_class or "unknown"
                        )
                    elif state is JobState.DEAD:
                        self.events.dead_lettered(
                            item.queue, item.job_type, verdict.error_class or "dead"
                        )
                    self._log_outcome(completion)
            if verdict.outcome is not Outcome.RELEASED:
                # A released job has no other message: its offset stays unfinished so the
                # partition's next owner reads it again and runs the job.
                done.append(item)
        if succeeded:
            self.stats["succeeded"] += succeeded
        if finished:
            self.events.jobs_finished(finished)
        self.mark_done(done)
        self.write(retry)

    def _put_aside(
        self, completions: list[Completion], locked: AbstractSet[uuid.UUID]
    ) -> list[Completion]:
        """Set aside the completions whose job row was locked (they keep their leases and
        their offsets stay unfinished); returns the others."""
        clock = time.monotonic()
        rest = []
        first_time = 0
        for completion in completions:
            if completion.item.job_id not in locked:
                rest.append(completion)
                continue
            pause = min(SET_ASIDE_MAX_SECONDS, SET_ASIDE_FIRST_SECONDS * 2.0**completion.set_asides)
            first_time += completion.set_asides == 0
            completion.set_asides += 1
            self._set_aside.append((clock + pause, completion))
        if first_time:
            log.info("%d result(s) set aside: another transaction holds their job rows", first_time)
        return rest

    def _stale(self, item: WorkItem, already_lost: bool) -> None:
        """The store refused the result: the attempt no longer held the lease."""
        self.stats["stale_refused"] += 1
        trace_stale(item)
        self.events.stale_result_refused(item.queue)
        if not already_lost:
            self.events.lease_expired(item.queue)
        log.warning(
            "stale result refused: job %s attempt %s",
            item.job_id,
            item.lease.attempt if item.lease else "?",
        )

    # -- pieces ------------------------------------------------------------------------------

    def _next_step(self, completion: Completion) -> Outgoing | None:
        item, verdict = completion.item, completion.verdict
        state = verdict.state
        if state is not JobState.RETRYING and state is not JobState.DEAD:
            return None  # most jobs: nothing to publish, nothing to look up
        topics = self.topics[item.queue]
        queue_settings = self.settings.queue(item.queue)
        if state is JobState.RETRYING:
            return retry_message(
                topics,
                queue_settings.retry_delays_seconds,
                key=item.key,
                value=item.value,
                base_headers=item.headers,
                wait_seconds=verdict.delay_seconds or 0.0,
                reason=verdict.delay_reason or DelayReason.RETRY,
                partition=item.partition % queue_settings.tier_partitions,
            )
        if verdict.state is JobState.DEAD:
            lease = item.lease
            return item.dead_letter_record(
                topics, verdict, attempts=lease.attempt if lease else 0, worker=self.worker_id
            )
        return None

    def _log_outcome(self, completion: Completion) -> None:
        verdict, item = completion.verdict, completion.item
        level = logging.INFO if verdict.state is not JobState.SUCCEEDED else logging.DEBUG
        if verdict.state is JobState.DEAD:
            level = logging.WARNING
        if not log.isEnabledFor(level):
            return
        log_event(
            log,
            f"job.{verdict.outcome}",
            level,
            **job_fields(
                item.job_id,
                item.tenant_id,
                item.lease.attempt if item.lease else None,
                queue=item.queue,
                job_type=item.job_type,
                worker=self.worker_id,
                duration_ms=int(completion.duration * 1000),
                error_class=verdict.error_class,
                error=verdict.error_message,
                delay_seconds=verdict.delay_seconds,
            ),
        )


_make_result = Result._make


def _result(completion: Completion) -> Result:
    item, verdict = completion.item, completion.verdict
    assert item.lease is not None
    lease = item.lease
    # ``_make`` with the fields in order (``Result``'s): a fifth of the cost of a call by
    # keyword, once per job.
    return _make_result(
        (
            item.job_id,
            lease.attempt,
            verdict.outcome,
            verdict.state,
            verdict.error_class,
            verdict.error_message,
            verdict.delay_seconds,
            verdict.give_back,
            int(completion.duration * 1000),
            lease.claimed_at,
        )
    )


def _refused_result(completion: Completion, reason: str) -> Completion:
    # The next step is not sent again: a DLQ record for a job whose retry is already in a
    # tier would be a second message of one job. The row says why it ended here.
    refused = Completion(
        completion.item,
        Verdict.dead("ResultRefused", f"the database refused the job's result: {reason}"),
        completion.duration,
    )
    return refused
