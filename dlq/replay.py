"""Replay of dead jobs from the DLQ (`tenantq dlq replay`).

Order of each batch, and why nothing is lost:

1. One guarded statement moves the batch's ``dead`` rows to ``runnable`` (attempts 0,
   replays + 1) and is committed.
2. Then the original envelope bytes are published and Kafka's acknowledgement awaited.

The row must be runnable *before* its message can be consumed: a worker that finds a dead
row takes the message as done, so publishing first could lose the replay. The other failure,
a runnable row whose publish failed, is reported (exit code 1) and repaired by running the
replay again: a row that is ``runnable`` with ``replays > 0`` and ``attempts = 0`` (revived,
never claimed since) is published again. That may duplicate a message that was in fact
delivered, which is harmless: the claim is fenced in Postgres, so a job runs once, and a
message whose job already succeeded is only acknowledged. For the same reason a job whose row
is ``succeeded`` (or in any state but dead) is skipped: replaying twice never runs it twice.

A decodable dead letter always had a job row: a worker claims (and so writes) a job before it
can dead-letter it. A record whose row is missing outlived its row, which retention deleted
(``tenantq prune``, ``TENANTQ_RETENTION__DEAD``): nothing says any more whether the job ran
since, or was replayed and succeeded, so the replay refuses it (``PRUNED``) rather than run
it as new.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from tenantq import headers
from tenantq.dlq.kafka_client import ClientReport, quiet_producer
from tenantq.dlq.pacing import RateLimiter, check_rate
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay_trace import ReplaySpans
from tenantq.errors import ConfigurationError
from tenantq.partitioner.murmur2 import default_partition
from tenantq.producer.publisher import Outgoing, Publisher, retry_message
from tenantq.settings import Settings
from tenantq.store import replay as replay_store
from tenantq.store.engine import DeploymentConnection
from tenantq.topics import QueueTopics

#: Records per statement and publish round when no ``--rate`` is given.
BATCH_SIZE = 200
#: Outcomes kept for display; counts and job ids cover everything.
OUTCOMES_KEPT = 1_000
#: How often canary jobs are looked at while waiting for them.
CANARY_POLL_SECONDS = 0.5

#: Headers of the dead letter that must not travel with the replayed message.
_DROPPED_HEADERS = frozenset(
    {
        headers.ERROR_CLASS,
        headers.ERROR_MESSAGE,
        headers.ATTEMPTS,
        headers.WORKER,
        headers.SOURCE_TOPIC,
        headers.SOURCE_PARTITION,
        headers.SOURCE_OFFSET,
        headers.DEAD_AT_MS,
        headers.PAYLOAD_SHA256,
        headers.REPLAY_COUNT,
        headers.DUE_AT_MS,
        headers.DELAY_REASON,
    }
)

Action = Literal["replayed", "republished", "skipped", "failed"]

#: Why a dead letter whose job row is gone is not replayed.
PRUNED = (
    "refused: its job row was pruned (retention), so whether it ran since is unknown; "
    "enqueue it again as a new job if it must run"
)


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """What became of one DLQ record."""

    letter: DeadLetter
    action: Action
    detail: str = ""


@dataclass
class ReplayReport:
    """The result of a replay or dry run. In a dry run, actions say what *would* happen."""

    dry_run: bool
    matched: int = 0
    #: Matched records that do not parse: never replayed (also counted as skipped).
    unreadable: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    skip_reasons: Counter[str] = field(default_factory=Counter)
    #: Jobs published (or, in a dry run, that would be), in order.
    replayed_ids: list[uuid.UUID] = field(default_factory=list)
    failed_ids: list[uuid.UUID] = field(default_factory=list)
    outcomes: list[ReplayOutcome] = field(default_factory=list)
    #: Why the replay stopped before the end (a failed canary), else None.
    stopped: str | None = None
    #: How the canary went, when there was one.
    canary: str | None = None

    def add(self, outcome: ReplayOutcome) -> None:
        self.actions[outcome.action] += 1
        if outcome.action == "skipped":
            self.skip_reasons[outcome.detail] += 1
            if outcome.letter.unreadable:
                self.unreadable += 1
        if len(self.outcomes) < OUTCOMES_KEPT:
            self.outcomes.append(outcome)

    @property
    def ok(self) -> bool:
        """No failed publish and no failed canary."""
        return not self.failed_ids and self.stopped is None


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How a replay runs, checked when made (``ConfigurationError``), whoever asks for it
    (the CLI, the console, code). ``dry_run`` only says what would happen; ``rate`` caps the
    publishes per second (``check_rate``); the first ``canary`` jobs go alone and must succeed
    within ``canary_timeout`` seconds before the rest follow; ``to`` is where the records go
    back to: the queue's main topic, or its first retry tier."""

    dry_run: bool = False
    rate: float | None = None
    canary: int = 0
    canary_timeout: float = 300.0
    to: Literal["main", "retry"] = "main"

    def __post_init__(self) -> None:
        if self.rate is not None:
            check_rate(self.rate)
        if self.canary < 0:
            raise ConfigurationError("canary must be zero or more jobs")


class Replayer:
    """Replays matching DLQ records of one queue, batch by batch (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        connection: DeploymentConnection,
        *,
        main_partitions: int,
        options: ReplayOptions = ReplayOptions(),
        on_outcome: Callable[[ReplayOutcome], None] | None = None,
    ) -> None:
        definition = settings.queue(queue)
        self.settings = settings
        self.queue = queue
        self.topics = QueueTopics.of(
            settings.topic_prefix, queue, len(definition.retry_delays_seconds)
        )
        self.connection = connection
        self.main_partitions = main_partitions
        self.dry_run = options.dry_run
        self.limiter = RateLimiter(options.rate) if options.rate is not None else None
        self.batch_size = self.limiter.batch_size(BATCH_SIZE) if self.limiter else BATCH_SIZE
        self.canary = 0 if options.dry_run else options.canary
        self.canary_timeout = options.canary_timeout
        self.to = options.to
        self.on_outcome = on_outcome
        self.report = ReplayReport(dry_run=options.dry_run)
        self._publisher: Publisher | None = None

    def run(self, letters: Iterable[DeadLetter]) -> ReplayReport:
        """Replay every record of ``letters`` (already filtered and limited)."""
        report = self.report
        seen: set[uuid.UUID] = set()
        batch: list[DeadLetter] = []
        canary_ids: list[uuid.UUID] = []
        try:
            for letter in letters:
                report.matched += 1
                reason = letter.skip_reason
                if reason is None and letter.job_id in seen:
                    reason = "another DLQ record of the same job was handled in this run"
                if reason is not None:
                    self._record(ReplayOutcome(letter, "skipped", reason))
                    continue
                assert letter.job_id is not None
                seen.add(letter.job_id)
                batch.append(letter)
                in_canary = len(canary_ids) < self.canary
                wanted = self.canary - len(canary_ids) if in_canary else self.batch_size
                if len(batch) >= min(wanted, self.batch_size):
                    published = self._flush(batch)
                    batch = []
                    if in_canary:
                        canary_ids += published
                        if len(canary_ids) >= self.canary and not self._canary_passed(canary_ids):
                            return report
            in_canary = len(canary_ids) < self.canary
            published = self._flush(batch)
            if in_canary and published + canary_ids:
                self._canary_passed(canary_ids + published)
            return report
        finally:
            if self._publisher is not None:
                self._publisher.close()

    # -- one batch ---------------------------------------------------------------------------

    def _flush(self, batch: list[DeadLetter]) -> list[uuid.UUID]:
        """Revive and publish one batch; returns the job ids Kafka acknowledged."""
        if not batch:
            return []
        rows = replay_store.job_replay_batch(
            self.connection,
            self.queue,
            [(letter.job_id, letter.payload_sha256) for letter in batch if letter.job_id],
            dry_run=self.dry_run,
        )
        chosen: list[tuple[DeadLetter, Action, str, Outgoing]] = []
        for letter in batch:
            assert letter.job_id is not None
            action, detail, replay_count = decide(rows[letter.job_id], self.queue)
            if action == "skipped":
                self._record(ReplayOutcome(letter, "skipped", detail))
            else:
                chosen.append((letter, action, detail, self._message(letter, replay_count)))
        if self.dry_run:
            for letter, action, detail, _ in chosen:
                self.report.replayed_ids.append(letter.job_id)  # type: ignore[arg-type]
                self._record(ReplayOutcome(letter, action, detail))
            return []
        if self.limiter is not None and chosen:
            self.limiter.acquire(len(chosen))
        messages = [message for *_, message in chosen]
        spans = ReplaySpans.start(self.queue, [(letter, message) for letter, *_, message in chosen])
        if spans is not None:
            messages = spans.messages
        acknowledged = self._publisher_of().publish(messages)
        if spans is not None:
            spans.end(acknowledged)
        published: list[uuid.UUID] = []
        for (letter, action, detail, _), ok in zip(chosen, acknowledged, strict=True):
            assert letter.job_id is not None
            if ok:
                published.append(letter.job_id)
                self.report.replayed_ids.append(letter.job_id)
                self._record(ReplayOutcome(letter, action, detail))
            else:
                self.report.failed_ids.append(letter.job_id)
                self._record(
                    ReplayOutcome(
                        letter,
                        "failed",
                        "Kafka did not acknowledge the publish; the row is runnable without "
                        "a message: run the same replay again",
                    )
                )
        return published

    def _message(self, letter: DeadLetter, replay_count: int) -> Outgoing:
        kept = [(name, value) for name, value in letter.headers if name not in _DROPPED_HEADERS]
        kept.append((headers.REPLAY_COUNT, str(replay_count).encode()))
        assert letter.value is not None
        if self.to == "retry":
            # Through the first retry tier, due at once: live traffic on the main topic is not
            # queued behind the replay.
            source = letter.source_partition or letter.dlq_partition
            return retry_message(
                self.topics,
                self.settings.queue(self.queue).retry_delays_seconds,
                key=letter.key,
                value=letter.value,
                base_headers=kept,
                wait_seconds=0.0,
                reason="replay",
                partition=source % self.settings.queue(self.queue).tier_partitions,
            )
        return Outgoing(self.topics.main, letter.key, letter.value, kept, self._partition(letter))

    def _partition(self, letter: DeadLetter) -> int | None:
        """Back where it came from when that was the main topic (tenant order and placement
        kept); otherwise where the default partitioner puts its key."""
        if (
            letter.source_topic == self.topics.main
            and letter.source_partition is not None
            and 0 <= letter.source_partition < self.main_partitions
        ):
            return letter.source_partition
        if letter.key is None:
            return None
        return default_partition(letter.key, self.main_partitions)

    def _publisher_of(self) -> Publisher:
        if self._publisher is None:
            # Quiet: a broker that drops the producer must not print librdkafka's every retry;
            # a publish it does not acknowledge is a "failed" outcome all the same.
            report = ClientReport(self.settings.require_bootstrap_servers())
            self._publisher = Publisher(
                self.settings,
                client_id="tenantq-dlq-replay",
                producer_factory=quiet_producer(report),
            )
        return self._publisher

    def _record(self, outcome: ReplayOutcome) -> None:
        self.report.add(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome)

    # -- canary ------------------------------------------------------------------------------

    def _canary_passed(self, job_ids: list[uuid.UUID]) -> bool:
        """Wait for the canary jobs to finish; stop the replay unless all succeeded."""
        deadline = time.monotonic() + self.canary_timeout
        while True:
            found = replay_store.job_state_summary(self.connection, job_ids)
            finished = [s for s in found.values() if s.state in ("succeeded", "dead", "canceled")]
            if len(finished) == len(job_ids) or time.monotonic() >= deadline:
                break
            time.sleep(CANARY_POLL_SECONDS)
        bad = [s for s in finished if s.state != "succeeded"]
        unfinished = len(job_ids) - len(finished)
        if not bad and not unfinished:
            self.report.canary = f"canary of {len(job_ids)} succeeded"
            return True
        parts = []
        if bad:
            first = bad[0]
            parts.append(
                f"{len(bad)} ended {', '.join(sorted({s.state for s in bad}))} "
                f"(e.g. {first.job_id}: {first.error_class}: {first.error_message})"
            )
        if unfinished:
            parts.append(f"{unfinished} not finished within {self.canary_timeout:g}s")
        self.report.canary = f"canary of {len(job_ids)} failed: {'; '.join(parts)}"
        self.report.stopped = f"{self.report.canary}; the rest was not replayed"
        return False


def decide(row: replay_store.ReplayRow, queue: str) -> tuple[Action, str, int]:
    """What to do with a record given its job row: (action, why, replay count to send)."""
    if row.state is None:
        return ("skipped", PRUNED, 0)
    if row.revived:
        return ("replayed", "dead -> runnable", row.replays_after or 1)
    if row.queue != queue:
        return ("skipped", f"the job belongs to queue {row.queue!r}", 0)
    if row.state == "runnable" and (row.replays or 0) > 0 and row.attempts == 0:
        return ("republished", "revived by an earlier replay, not claimed since", row.replays or 1)
    if row.state == "dead" and row.cancel_requested:
        return ("skipped", "dead with a cancellation request", 0)
    if row.state == "dead" and not row.same_payload:
        return ("skipped", "payload differs from the job row (a conflicting copy)", 0)
    return ("skipped", f"job is {row.state}", 0)
