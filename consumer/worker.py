"""The worker: one Kafka consumer-group member per process that runs handlers, with Postgres as
the truth.

One thread (the poll loop) owns the consumer: it polls, claims, dispatches, writes results,
stores offsets and reacts to rebalances; it never waits on a handler. Handlers run on the
``HandlerRunner``; leases are extended by the ``Heartbeat`` thread.

Per poll batch: decode every message (undecodable ones go to the DLQ), claim all of them in one
statement, sort out the rest (already terminal: done; leased by a live worker: parked; attempts
used up: dead), and queue the leases for fair dispatch. Results are written in batches fenced
by (job id, attempt, owner); retries and dead letters are acknowledged by Kafka before their
job row moves and before the source offset is marked done. Offsets are stored only up to the
lowest offset of each partition whose job has not reached a durable state.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from tenantq.app import App, JobType
from tenantq.consumer.context import JobContext
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.events import WorkerEvents
from tenantq.consumer.heartbeat import Heartbeat
from tenantq.consumer.intake import Intake
from tenantq.consumer.outcomes import Verdict, classify
from tenantq.consumer.partitions import Partitions
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.consumer.work import WorkItem
from tenantq.errors import (
    JobCanceled,
    PayloadValidationError,
    PermanentError,
    RateLimited,
    Snooze,
)
from tenantq.headers import DelayReason
from tenantq.log import job_fields, log_event
from tenantq.observability.worker import WorkerObservability
from tenantq.producer.publisher import Outgoing, Publisher, dead_letter, retry_message
from tenantq.settings import Settings
from tenantq.states import JobState, Outcome
from tenantq.store.job_store import JobStore, Result
from tenantq.topic_admin import queue_topics
from tenantq.topics import QueueTopics, consumer_group

log = logging.getLogger("tenantq.worker")


class Completion:
    """A verdict waiting to be written: from a finished task, or decided without running."""

    __slots__ = ("item", "verdict", "duration")

    def __init__(self, item: WorkItem, verdict: Verdict, duration: float) -> None:
        self.item = item
        self.verdict = verdict
        self.duration = duration


class Worker:
    """Runs the handlers of ``app`` for ``queues`` as one member of each queue's group.

    Several queues are served by weight (``TENANTQ_QUEUES`` weights) or, with
    ``strict_priority=True``, strictly in the order given.
    """

    def __init__(
        self,
        app: App,
        queues: list[str] | None = None,
        *,
        settings: Settings | None = None,
        concurrency: int | None = None,
        strict_priority: bool = False,
        worker_id: str | None = None,
        retry_policy: RetryPolicy | None = None,
        install_signal_handlers: bool = True,
    ) -> None:
        self.app = app
        self.settings = settings or app.settings
        self.queues = queues or app.queues() or ["default"]
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.slots = concurrency or self.settings.worker.concurrency
        self.retry_policy = retry_policy or RetryPolicy()
        self.install_signal_handlers = install_signal_handlers
        self.topics: dict[str, QueueTopics] = {
            q: queue_topics(self.settings, q) for q in self.queues
        }
        self.queue_of_topic: dict[str, tuple[str, int | None]] = {}
        for name, topics in self.topics.items():
            self.queue_of_topic[topics.main] = (name, None)
            for tier, topic in enumerate(topics.retries):
                self.queue_of_topic[topic] = (name, tier)
        weights = {q: self.settings.queue(q).weight for q in self.queues}
        # Owned by the poll thread unless said otherwise.
        self.dispatcher: FairDispatcher[WorkItem] = FairDispatcher(weights, strict=strict_priority)
        #: Handler threads put finished tasks here; the poll thread takes them.
        self._finished: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self._pending: list[Completion] = []
        self._tasks: dict[uuid.UUID, Task] = {}
        #: Jobs whose lease this process holds; read by the heartbeat thread under the lock.
        self._held_lock = threading.Lock()
        self._held: dict[uuid.UUID, WorkItem] = {}
        #: Jobs whose lease the heartbeat found lost (counted once as an expiry); under the lock.
        self._lost: set[uuid.UUID] = set()
        self._type_running: dict[str, int] = {}
        #: Set from any thread (signal handlers, ``stop()``).
        self._stop_requested = threading.Event()
        self._drain_deadline: float | None = None
        self.stats: dict[str, int] = {"succeeded": 0, "stale_refused": 0, "executed": 0}
        self.guard = DependencyGuard(policies_from(app.dependencies))
        self.observability = WorkerObservability(self.settings, self.queues)
        #: Where the worker reports what happens (the metrics subscribe here).
        self.events: WorkerEvents = self.observability.metrics

    # -- lifecycle --

    @property
    def group_id(self) -> str:
        """One consumer per process joins one group: the queue's own, or for a worker of
        several queues, the group of that queue set (run every worker of those queues with the
        same set)."""
        return consumer_group(self.settings.topic_prefix, "+".join(sorted(self.queues)))

    def stop(self, *, immediately: bool = False) -> None:
        """Ask for a graceful stop (thread-safe); ``immediately`` skips the drain window."""
        if self._stop_requested.is_set() or immediately:
            self._drain_deadline = time.monotonic()
        self._stop_requested.set()

    def run(self) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT (a second signal shortens the drain)."""
        self._start()
        try:
            while not self._stop_requested.is_set():
                self._loop_once()
            self._drain()
        finally:
            self._close()

    def _start(self) -> None:
        settings = self.settings
        self.store = JobStore.open(settings, self.worker_id)
        self.side_store = JobStore.open(settings, self.worker_id)
        self.side_lock = threading.Lock()
        self.store.register_worker(socket.gethostname(), os.getpid(), self.queues, self.slots)
        self.observability.start()
        self.publisher = Publisher(settings, f"tenantq-worker-{self.worker_id}")
        self.runner = HandlerRunner(self.slots, self._finished.put)
        self.partitions = Partitions(self.settings.worker.read_ahead_per_partition)
        self.intake = Intake(self)
        self.heartbeat = Heartbeat(
            self.side_store,
            self.side_lock,
            interval=settings.worker.heartbeat_interval_seconds,
            lease_seconds=settings.worker.lease_seconds,
            held=self._held_ids,
            usage=lambda: (self.runner.busy, self.slots),
            on_cancel=lambda job_id: self._signal(job_id, "operator"),
            on_lost=self._lease_lost,
        )
        self.heartbeat.start()
        self.consumer = Consumer(consumer_config(settings, self.group_id, self.worker_id))
        topics = [t for q in self.queues for t in (self.topics[q].main, *self.topics[q].retries)]
        self.consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        log.info("worker %s started: queues=%s slots=%d", self.worker_id, self.queues, self.slots)

    # -- the poll loop --

    def _loop_once(self) -> None:
        # Never sit in consume() while finished work waits to be written: that wait, not
        # Postgres, bounded throughput (slots / loop time).
        if not self._finished.empty() or self._pending:
            timeout = 0.0
        elif self.runner.busy or len(self.dispatcher):
            timeout = 0.001
        else:
            timeout = 0.1
        messages = self.consumer.consume(
            num_messages=self.settings.worker.poll_batch, timeout=timeout
        )
        if messages:
            self.intake.take([m for m in messages if self._usable(m)])
        self.intake.route_due()
        self.intake.retry_parked()
        self._expire()
        self._collect_finished()
        self._write_completions()
        self._dispatch()
        # Offsets also move without a result (dead letters, duplicates, finished jobs).
        self.partitions.store(self.consumer)
        self.partitions.apply_flow_control(self.consumer)
        self.observability.observe(
            self.partitions, self.consumer, self.runner.busy, self.slots, self.queue_of_topic
        )

    def _usable(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", error)
        return False

    def _dispatch(self) -> None:
        """Choose the next jobs fairly, claim them in one statement, start the claimed ones."""
        if self._drain_deadline is not None or self._stop_requested.is_set():
            return
        for _ in range(4):
            free = self.slots - self.runner.busy
            if free <= 0 or not len(self.dispatcher):
                return
            chosen: list[WorkItem] = []
            while len(chosen) < free:
                item = self.dispatcher.pop(self._type_has_room)
                if item is None:
                    break
                self._reserve(item)
                chosen.append(item)
            if not chosen:
                return
            claimed = self.intake.claim(chosen)
            for item in chosen:
                if item.lease is None:
                    self._task_done(item)
            for item in claimed:
                job_type = self.job_type_of(item.job_type)
                if job_type is None:
                    self._task_done(item)
                    self.complete_without_running(item, self.intake.unknown_type_verdict(item))
                    continue
                deferral = self._dependency_deferral(job_type)
                if deferral is not None:
                    self._task_done(item)
                    self.complete_without_running(item, deferral)
                    continue
                self._start_task(item)

    def _dependency_deferral(self, job_type: JobType) -> Verdict | None:
        """An open breaker (or no permission left) moves the job to a retry tier without
        running it and without consuming its attempt."""
        names = job_type.dependencies
        if not names:
            return None
        wait = self.guard.open_for(names)
        if wait is None and self.guard.acquire(names):
            return None
        reason = f"circuit open for {', '.join(names)}" if wait else "dependency busy"
        return Verdict.snoozed(
            "CircuitOpen" if wait else "DependencyBusy",
            reason,
            max(wait or 0.0, 0.5),
            reason=DelayReason.BREAKER,
        )

    def _reserve(self, item: WorkItem) -> None:
        self.dispatcher.started(item)
        self._type_running[item.job_type] = self._type_running.get(item.job_type, 0) + 1

    def _type_has_room(self, item: WorkItem) -> bool:
        job_type = self.app.find(item.job_type)
        if job_type is None:
            return True
        limit = job_type.concurrency
        if limit is not None and self._type_running.get(item.job_type, 0) >= limit:
            return False
        return not job_type.dependencies or self.guard.ready(job_type.dependencies)

    def _start_task(self, item: WorkItem) -> None:
        job_type = self.app.job_type(item.job_type)
        lease = item.lease
        assert lease is not None
        timeout = job_type.timeout or self.settings.worker.default_timeout_seconds
        job_id = item.envelope.job_id
        context = JobContext(
            job_id=job_id,
            queue=item.queue,
            job_type=item.job_type,
            tenant=item.tenant_id,
            attempt=lease.attempt,
            max_attempts=lease.max_attempts,
            deadline=time.monotonic() + timeout,
            progress=lease.progress,
            replays=lease.replays,
            idempotency_key=item.envelope.idempotency_key,
            _heartbeat=lambda: self.heartbeat.renew_one(job_id),
            _checkpoint=lambda progress: self.heartbeat.checkpoint(job_id, lease.attempt, progress),
        )
        task = Task(job_type, item.envelope.payload, context, context.deadline, item=item)
        self._tasks[job_id] = task
        self.stats["executed"] += 1
        wait = time.time() - item.envelope.created_at.timestamp() if lease.attempt == 1 else None
        self.events.job_started(item.queue, item.job_type, item.tenant_id, wait)
        self.runner.submit(task)

    def _expire(self) -> None:
        for task in self.runner.expire():
            log.warning("job %s timed out", task.context.job_id)

    # -- results --

    def _collect_finished(self) -> None:
        while True:
            try:
                task = self._finished.get_nowait()
            except queue.Empty:
                return
            item: WorkItem = task.item
            self._task_done(item)
            self._record_dependencies(task)
            lease = item.lease
            assert lease is not None
            verdict = classify(
                task.error,
                job_type=task.job_type,
                attempt=lease.attempt,
                max_attempts=lease.max_attempts,
                policy=self.retry_policy,
                cancel_reason=_effective_cancel_reason(task),
                timed_out=task.timed_out,
            )
            self._pending.append(Completion(item, verdict, task.duration))

    def _record_dependencies(self, task: Task) -> None:
        names = task.job_type.dependencies
        if not names:
            return
        error = task.error
        if isinstance(error, RateLimited):
            # A throttle is the dependency protecting itself, not failing.
            for name in names:
                self.guard.breaker(name).return_permit()
                self.events.dependency_throttled(name)
            return
        if isinstance(error, PermanentError | PayloadValidationError | Snooze | JobCanceled):
            for name in names:
                self.guard.breaker(name).return_permit()
            return
        success = error is None and not task.timed_out
        states = self.guard.record(names, success)
        for name, state in states.items():
            self.events.dependency_call(name, task.duration)
            self.events.breaker_state(name, state)

    def _task_done(self, item: WorkItem) -> None:
        self._tasks.pop(item.envelope.job_id, None)
        self.dispatcher.finished(item)
        count = self._type_running.get(item.job_type, 1) - 1
        self._type_running[item.job_type] = max(0, count)

    def complete_without_running(self, item: WorkItem, verdict: Verdict) -> None:
        """Decide a leased job's fate without a handler (unknown type, released, ...)."""
        self._pending.append(Completion(item, verdict, 0.0))

    def _write_completions(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        outgoing: list[Outgoing] = []
        needs_ack: list[tuple[Completion, int]] = []
        for completion in batch:
            message = self._next_step_message(completion)
            if message is not None:
                needs_ack.append((completion, len(outgoing)))
                outgoing.append(message)
        acknowledged = self.publisher.publish(outgoing)
        ready = [c for c in batch if c not in {c2 for c2, _ in needs_ack}]
        for completion, index in needs_ack:
            if acknowledged[index]:
                ready.append(completion)
            else:
                # Kafka did not take the next step: keep the lease and try again.
                self._pending.append(completion)
        self._write_results(ready)

    def _next_step_message(self, completion: Completion) -> Outgoing | None:
        item, verdict = completion.item, completion.verdict
        topics = self.topics[item.queue]
        partition = item.partition % self.settings.queue(item.queue).tier_partitions
        if verdict.state is JobState.RETRYING:
            return retry_message(
                topics,
                self.settings.queue(item.queue).retry_delays_seconds,
                key=item.key,
                value=item.value,
                base_headers=item.headers,
                wait_seconds=verdict.delay_seconds or 0.0,
                reason=verdict.delay_reason or DelayReason.RETRY,
                partition=partition,
            )
        if verdict.state is JobState.DEAD:
            lease = item.lease
            return dead_letter(
                topics,
                key=item.key,
                value=item.value,
                base_headers=item.headers,
                error_class=verdict.error_class or "Dead",
                error_message=verdict.error_message or "",
                attempts=lease.attempt if lease else 0,
                worker=self.worker_id,
                source=(item.topic, item.partition, item.offset),
            )
        return None

    def _write_results(self, completions: list[Completion]) -> None:
        if not completions:
            return
        results = []
        for completion in completions:
            item, verdict = completion.item, completion.verdict
            assert item.lease is not None
            results.append(
                Result(
                    job_id=item.envelope.job_id,
                    attempt=item.lease.attempt,
                    outcome=verdict.outcome,
                    state=verdict.state,
                    error_class=verdict.error_class,
                    error_message=verdict.error_message,
                    delay_seconds=verdict.delay_seconds,
                    give_back=verdict.give_back,
                    duration_ms=int(completion.duration * 1000),
                    started_at=item.lease.claimed_at,
                )
            )
        applied = self.store.complete_batch(results)
        for completion in completions:
            item = completion.item
            job_id = item.envelope.job_id
            with self._held_lock:
                self._held.pop(job_id, None)
                already_lost = job_id in self._lost
                self._lost.discard(job_id)
            if job_id not in applied:
                self.stats["stale_refused"] += 1
                self.events.stale_result_refused(item.queue)
                if not already_lost:
                    self.events.lease_expired(item.queue)
                log.warning(
                    "stale result refused: job %s attempt %s",
                    job_id,
                    item.lease.attempt if item.lease else "?",
                )
            else:
                if completion.verdict.state is JobState.SUCCEEDED:
                    self.stats["succeeded"] += 1
                self._observe(completion)
                self._log_outcome(completion)
            if completion.verdict.outcome is not Outcome.RELEASED:
                # A released job has no other message: its offset stays unfinished so the
                # partition's next owner reads it again and runs the job.
                self.partitions.done(item.topic, item.partition, item.offset)
        self.partitions.store(self.consumer)

    def _log_outcome(self, completion: Completion) -> None:
        verdict, item = completion.verdict, completion.item
        level = logging.INFO if verdict.state is not JobState.SUCCEEDED else logging.DEBUG
        if verdict.state is JobState.DEAD:
            level = logging.WARNING
        log_event(
            log,
            f"job.{verdict.outcome}",
            level,
            **job_fields(
                item.envelope.job_id,
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

    def _observe(self, completion: Completion) -> None:
        item, verdict = completion.item, completion.verdict
        attempts = item.lease.attempt if item.lease else 0
        self.events.job_finished(
            item.queue,
            item.job_type,
            item.tenant_id,
            verdict.outcome,
            completion.duration,
            attempts,
        )
        if verdict.state is JobState.RETRYING:
            self.events.retried(item.queue, item.job_type, verdict.error_class or "unknown")
        elif verdict.state is JobState.DEAD:
            self.events.dead_lettered(item.queue, item.job_type, verdict.error_class or "dead")

    # -- leases --

    def hold(self, item: WorkItem) -> None:
        with self._held_lock:
            self._held[item.envelope.job_id] = item

    def _held_ids(self) -> list[uuid.UUID]:
        with self._held_lock:
            return list(self._held)

    def _signal(self, job_id: uuid.UUID, reason: str) -> None:
        task = self._tasks.get(job_id)
        if task is not None:
            task.context.signal_cancel(reason)

    def _lease_lost(self, job_id: uuid.UUID) -> None:
        """Heartbeat thread: a lease we hold is no longer ours (it expired and the job moved
        on). Counted once per job; its handler is asked to stop, its result will be stale."""
        with self._held_lock:
            item = self._held.get(job_id)
            first = item is not None and job_id not in self._lost
            if first:
                self._lost.add(job_id)
        if first and item is not None:
            self.events.lease_expired(item.queue)
        self._signal(job_id, "lease_lost")

    def release_leases(self, items: Iterable[WorkItem], reason: str) -> None:
        """Give leases back (shutdown, revoke): the job is runnable again, attempt returned."""
        completions = [
            Completion(item, Verdict.released(reason), 0.0)
            for item in items
            if item.lease is not None
        ]
        self._write_results(completions)

    # -- rebalance --

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self.partitions.assigned(partitions)
            log.info("assigned %s", [(p.topic, p.partition) for p in partitions])
            if partitions:
                consumer.incremental_assign(partitions)
                # A partition we paused, gave up and got back can come back still paused
                # (the pause outlives the assignment in the client); our state for it starts
                # fresh and unpaused, so the client's must too, or it never flows again.
                consumer.resume(partitions)
        except Exception:  # callbacks never raise into the client
            log.exception("on_assign failed")

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._give_up_partitions(partitions, lost=False)
        except Exception:
            log.exception("on_revoke failed")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._give_up_partitions(partitions, lost=True)
        except Exception:
            log.exception("on_lost failed")

    def _give_up_partitions(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        if not keys:
            return
        log.info("%s %s", "lost" if lost else "revoked", sorted(keys))

        def ours(item: WorkItem) -> bool:
            return (item.topic, item.partition) in keys

        self.partitions.mark_revoked(keys)
        for topic, partition in keys:
            self.events.partition_revoked(topic, partition)
        self.intake.drop_parked(ours)
        self.intake.drop_waiting(keys)
        waiting = self.dispatcher.remove(ours)
        self._pending, kept = [], self._pending
        self._pending = [c for c in kept if not ours(c.item)]
        finishing = [c for c in kept if ours(c.item)]
        if not lost:
            # Results already decided are written; their offsets can be committed.
            self._pending.extend(finishing)
            self._write_completions()
            deadline = time.monotonic() + self.settings.worker.revoke_grace_seconds
            while time.monotonic() < deadline and any(ours(t.item) for t in self.runner.running()):
                time.sleep(0.02)
                self._expire()
                self._collect_finished()
                self._write_completions()
        unfinished = [t for t in self.runner.running() if ours(t.item)]
        for task in unfinished:
            task.context.signal_cancel("revoked")
        abandoned = [t.item for t in unfinished if self.runner.abandon(t)]
        for item in abandoned:
            self._task_done(item)
        self.release_leases(
            [*waiting, *abandoned], "partition revoked" if not lost else "partition lost"
        )
        if not lost:
            self.partitions.commit(self.consumer, keys)
        self.partitions.forget(keys)

    # -- shutdown --

    def _drain(self) -> None:
        """The deploy contract: no new leases, running jobs finish within the drain window (their
        leases kept alive), the rest are released, offsets committed, then the group is left."""
        settings = self.settings.worker
        if self._drain_deadline is None:
            self._drain_deadline = time.monotonic() + settings.drain_seconds
        log.info("draining %d running jobs", self.runner.busy)
        self.partitions.pause_all(self.consumer)
        self.release_leases(self.dispatcher.remove(lambda item: True), "worker shutting down")
        self.intake.drop_parked(lambda item: True)
        self.intake.drop_waiting(None)
        while self.runner.busy and time.monotonic() < self._drain_deadline:
            self.consumer.consume(num_messages=1, timeout=0.05)  # stay in the group
            self._expire()
            self._collect_finished()
            self._write_completions()
        for task in self.runner.running():
            task.context.signal_cancel("shutdown")
        time.sleep(0.2 if self.runner.busy else 0)
        self._collect_finished()
        self._write_completions()
        abandoned = [t.item for t in self.runner.running() if self.runner.abandon(t)]
        for item in abandoned:
            self._task_done(item)
        self.release_leases(abandoned, "worker shut down before the job finished")
        for _ in range(3):
            if not self._pending:
                break
            self._write_completions()
        self.partitions.commit(self.consumer, None)

    def _close_consumer(self, timeout: float = 30.0) -> None:
        """Leave the group. ``close()`` can hang in a rebalance (librdkafka #4527), so it runs
        with a bound; the process exits regardless, and the group notices via the session."""
        closer = threading.Thread(
            target=self.consumer.close, name="tenantq-consumer-close", daemon=True
        )
        closer.start()
        closer.join(timeout)
        if closer.is_alive():
            log.warning("consumer close did not finish within %.0fs; leaving anyway", timeout)

    def _close(self) -> None:
        steps: list[Callable[[], object]] = [
            self._close_consumer,
            lambda: self.heartbeat.stop(),
            lambda: self.store.stop_worker(),
            lambda: self.publisher.close(),
            lambda: self.runner.stop(timeout=1.0),
            lambda: self.store.close(),
            lambda: self.side_store.close(),
            lambda: self.observability.close(),
        ]
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("error while stopping the worker")
        log.info("worker %s stopped", self.worker_id)

    # -- helpers for Intake --

    def job_type_of(self, name: str) -> JobType | None:
        job_type = self.app.find(name)
        return job_type if job_type is not None and job_type.handler is not None else None


#: Client-side group settings that the KIP-848 protocol moves to the broker (and refuses).
CLASSIC_ONLY_KEYS = (
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
)


def consumer_config(settings: Settings, group_id: str, worker_id: str) -> dict[str, Any]:
    """Defaults first, then the user's librdkafka keys, then what correctness needs."""
    config: dict[str, Any] = {
        "max.poll.interval.ms": 300000,
        "auto.commit.interval.ms": 1000,
        "fetch.max.bytes": 16 * 1024 * 1024,
        # A retry-tier partition resumed at its due time joins the next fetch request; a
        # long fetch wait (500 ms by default) would make every retry that much late.
        "fetch.wait.max.ms": 50,
        "auto.offset.reset": "earliest",
    }
    protocol = settings.worker.group_protocol
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    config.update(settings.kafka_config)
    if protocol == "consumer":
        dropped = [key for key in CLASSIC_ONLY_KEYS if config.pop(key, None) is not None]
        if dropped:
            log.warning(
                "ignoring %s: the consumer group protocol sets them on the broker "
                "(group.consumer.* configs)",
                ", ".join(dropped),
            )
        group = {
            "group.protocol": "consumer",
            "group.remote.assignor": settings.worker.group_remote_assignor,
        }
    else:
        group = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"}
    return settings.kafka_client_config(
        **config,
        **group,
        **{
            "group.id": group_id,
            "client.id": f"tenantq-{worker_id}",
            "enable.auto.commit": True,
            # Offsets are stored by hand, only behind durable job state.
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        },
    )


def _effective_cancel_reason(task: Task) -> str | None:
    """An operator's cancel counts only if it came before the handler returned."""
    context = task.context
    reason = context.cancel_reason
    if reason is None:
        return None
    if task.error is None and context.cancelled_at is not None and task.finished is not None:
        if context.cancelled_at > task.finished:
            return None
    return reason


__all__ = ["Worker", "KafkaException"]
