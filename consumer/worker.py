"""The worker: one Kafka consumer-group member per process that runs handlers, with Postgres as
the truth.

One thread (the poll loop) owns the consumer and the worker's state: it polls, decodes,
dispatches, starts attempts, settles results, stores offsets and reacts to rebalances; it
never waits on a handler or on Postgres. Handlers run in the ``Executor`` (a handler process
under ``tenantq worker``, threads otherwise); the writes to Postgres go through the
``Ledger``'s two lanes (claims, results), whose answers the loop applies; leases are extended
by the ``Heartbeat`` thread.

Per dispatch round: the next jobs are chosen fairly and claimed in one statement; the claimed
ones start, the rest are sorted out (already terminal: done; leased by a live worker:
parked; attempts used up: dead). Results are written in batches fenced by (job id, attempt,
owner), after their next step (a retry, a dead letter) is acknowledged by Kafka. Offsets are
stored only up to the lowest offset of each partition whose job has not reached a durable
state.

Faults it survives without dying: a database that goes away (it claims nothing, pauses its
partitions, holds results and reconnects with backoff; ``DatabaseHealth``), a handler process
that dies (a new one starts; the jobs that ran beside the culprit run again under their
leases, the culprit's attempt counts), rows the database refuses (those jobs go to the DLQ
with the reason), a broker that restarts (the client reconnects; unacknowledged next steps
are published again).
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from tenantq.app import App, JobType
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.completer import Completer, Completion
from tenantq.consumer.context import JobContext
from tenantq.consumer.database_health import EXIT_DATABASE_GONE, DatabaseHealth
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.events import WorkerEvents
from tenantq.consumer.executor import Executor, ProcessExecutor, ThreadExecutor
from tenantq.consumer.group_config import consumer_config
from tenantq.consumer.heartbeat import Heartbeat
from tenantq.consumer.hot_lane import HotLane
from tenantq.consumer.intake import Intake
from tenantq.consumer.ledger import (
    Claim,
    Complete,
    CountCrashes,
    EnterLane,
    Ledger,
    SettleWaiting,
)
from tenantq.consumer.outcomes import BreakerSignal, Verdict, crashed_too_often
from tenantq.consumer.partitions import Partitions
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import Task
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.errors import DatabaseAccessRefused, DatabaseUnavailable
from tenantq.headers import DelayReason
from tenantq.kafka_access import check_kafka_access
from tenantq.observability.worker import WorkerObservability
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.publisher import Publisher
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore
from tenantq.store.placement import PlacementReader, PlacementWatcher
from tenantq.topic_admin import queue_topics
from tenantq.topics import QueueTopics, consumer_group

log = logging.getLogger("tenantq.worker")

#: How long shutdown waits for the database to take the last results.
FINAL_WRITE_SECONDS = 10.0
#: The poll loop's wait while work is in flight (an answer ends it sooner).
IN_FLIGHT_WAIT_SECONDS = 0.001
#: Job type names whose limits ``Worker._limited`` remembers (names come from messages).
LIMITED_TYPES_REMEMBERED = 10_000
#: How often the poll loop asks the client for a message while the read-ahead budget is full.
READ_WHEN_FULL_SECONDS = 0.1
#: What ``_release_holds`` returns when no lease was lost (shared: nobody changes it).
_NONE_LOST: frozenset[uuid.UUID] = frozenset()


class Worker:
    """Runs the handlers of ``app`` for ``queues`` as one member of each queue's group.

    Several queues are served by weight (``TENANTQ_QUEUES`` weights) or, with
    ``strict_priority=True``, strictly in the order given among the jobs already read. With
    ``app_reference`` (``"module:attribute"`` naming ``app``, as ``tenantq worker`` passes it)
    handlers run in a handler process, so that one that kills its process costs a new handler
    process, never this member; without it they run in this process's threads.
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
        app_reference: str | None = None,
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
        #: The queues' hot lanes (their messages are work like the main topic's).
        self.lane_topics = frozenset(topics.lane for topics in self.topics.values())
        for name, topics in self.topics.items():
            self.queue_of_topic[topics.main] = (name, None)
            self.queue_of_topic[topics.lane] = (name, None)
            for tier, topic in enumerate(topics.retries):
                self.queue_of_topic[topic] = (name, tier)
        isolation = self.settings.tenant_isolation
        weights = {q: self.settings.queue(q).weight for q in self.queues}
        weights.update({f"{q}{HOT_LANE_SUFFIX}": isolation.lane_weight for q in self.queues})
        self.exit_code = 0
        self.stats: dict[str, int] = {
            "succeeded": 0,
            "stale_refused": 0,
            "executed": 0,
            "claimed_ahead": 0,
        }
        self.observability = WorkerObservability(self.settings, self.queues)
        #: Where the worker reports what happens (the metrics subscribe here).
        self.events: WorkerEvents = self.observability.metrics
        self.health = DatabaseHealth(on_change=self.events.database_up)
        self.ledger = Ledger(
            lambda lane: JobStore.open(self.settings, self.worker_id, role=f"worker-{lane}"),
            self.health,
            on_answer=self._wake_up,
        )
        self.guard = DependencyGuard(policies_from(app.dependencies))
        # Owned by the poll thread unless said otherwise.
        self.dispatcher: FairDispatcher[WorkItem] = FairDispatcher(
            weights,
            strict=strict_priority,
            # One tenant cannot hold every slot while others wait (at least one slot).
            tenant_in_flight_limit=max(1, int(self.slots * isolation.tenant_max_share)),
            lane_of=lambda item: item.dispatch_lane,
        )
        self._placements = PlacementBook(
            PlacementReader(self.settings),
            self.settings.producer.placement_ttl_seconds,
            refresh_in_background=True,
        )
        self._placement_watcher = (
            PlacementWatcher(self.settings, self._placements.changed)
            if self.settings.producer.placement_watch
            else None
        )
        self.hot_lane = HotLane(
            isolation,
            self._placements,
            {topics.main: name for name, topics in self.topics.items()},
            self.events,
            self._move_to_lane,
        )
        self.partitions = Partitions(
            self.settings.worker.read_ahead_per_partition,
            self.settings.tenant_isolation.lane_read_ahead_per_partition,
            self.lane_topics,
            frozenset(topics.main for topics in self.topics.values()),
        )
        self.intake = Intake(self)
        self._tasks: dict[uuid.UUID, Task] = {}
        #: When the poll loop last asked the client for messages (``time.monotonic``).
        self._last_read = 0.0
        self._type_running: dict[str, int] = {}
        #: Running per (job type, tenant), for job types with a ``tenant_concurrency``.
        self._type_tenant_running: dict[tuple[str, str], int] = {}
        #: ``_limited`` by job type name.
        self._limited_types: dict[str, JobType | None] = {}
        #: Items chosen and handed to the claims lane, not answered yet (they hold slots).
        self._claiming = 0
        #: Leased items waiting for a free handler slot (claimed ahead), oldest first.
        self._ready: collections.deque[WorkItem] = collections.deque()
        ahead_limit = self.settings.worker.claim_ahead_limit
        self.claim_ahead = ClaimAhead(
            self.slots if ahead_limit is None else ahead_limit, time.monotonic()
        )
        #: What the poll loop last saw of the database (it pauses its partitions when down).
        self._database_seen_up = True
        #: Executor threads put finished attempts here; the poll thread takes them.
        #: Finished attempts, in the batches the executor handed them over in.
        self._finished: queue.SimpleQueue[list[Task]] = queue.SimpleQueue()
        #: Set by the threads that hand the poll thread something (finished attempts, answers
        #: of the ledger's lanes): it waits on this, not in Kafka, while work is in flight.
        self._wake = threading.Event()
        #: The handler process's receiver thread puts crashes here.
        self._crashes: queue.SimpleQueue[tuple[list[Task], Task | None, str]] = queue.SimpleQueue()
        #: Jobs whose lease this process holds; read by the heartbeat thread under the lock.
        self._held_lock = threading.Lock()
        self._held: dict[uuid.UUID, WorkItem] = {}
        #: Held jobs whose result is on its way to the database (a lease the heartbeat then
        #: finds gone was completed, not lost); under the lock.
        self._completing: set[uuid.UUID] = set()
        #: Jobs whose lease the heartbeat found lost (counted once as an expiry); under the lock.
        self._lost: set[uuid.UUID] = set()
        #: Set from any thread (signal handlers, ``stop()``).
        self._stop_requested = threading.Event()
        self._drain_deadline: float | None = None
        self.executor: Executor
        if app_reference is not None and self.settings.worker.handler_process:
            self.executor = ProcessExecutor(
                app_reference,
                self.slots,
                self.settings,
                self.worker_id,
                self.retry_policy,
                on_finished=self._attempts_finished,
                on_crash=lambda tasks, culprit, how: self._crashes.put((tasks, culprit, how)),
            )
        else:
            self.executor = ThreadExecutor(self.slots, self._attempt_finished, self.retry_policy)
        self.publisher = Publisher(self.settings, f"tenantq-worker-{self.worker_id}")
        self.completer = Completer(
            settings=self.settings,
            topics=self.topics,
            worker_id=self.worker_id,
            publisher=self.publisher,
            ledger=self.ledger,
            events=self.events,
            release_holds=self._release_holds,
            mark_done=self.mark_all_done,
            completing=self._completing_now,
            stats=self.stats,
        )
        self.heartbeat = Heartbeat(
            JobStore.open(self.settings, self.worker_id, role="worker-heartbeat"),
            self.health,
            interval=self.settings.worker.heartbeat_interval_seconds,
            lease_seconds=self.settings.worker.lease_seconds,
            held=self._held_ids,
            usage=lambda: (self.executor.busy, self.slots),
            on_cancel=lambda job_id: self._signal(job_id, "operator"),
            on_lost=self._lease_lost,
        )

    # -- lifecycle -----------------------------------------------------------------------------

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
        """Run until ``stop()`` or SIGTERM/SIGINT (a second signal shortens the drain).

        Raises ``KafkaAccessRefused`` or ``DatabaseAccessRefused`` at start when the cluster or the
        database refuses the settings' credentials or TLS; a server that is down is waited
        for instead."""
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        # Credentials the cluster refuses are a one-line error now, not a silent wait.
        check_kafka_access(self.settings, stopping=self._stop_requested.is_set)
        if not self._register():
            return
        self._start()
        try:
            while not self._stop_requested.is_set():
                self._loop_once()
            self._drain()
        finally:
            self._close()

    def _register(self) -> bool:
        """Enter the worker registry, waiting for the database as long as the outage limit
        allows (a worker started during a database restart waits, it does not crash)."""
        store = JobStore.open(self.settings, self.worker_id, role="worker")
        attempt = 0
        try:
            while not self._stop_requested.is_set():
                try:
                    store.register_worker(
                        socket.gethostname(), os.getpid(), self.queues, self.slots
                    )
                    self.health.succeeded()
                    return True
                except DatabaseUnavailable as error:
                    if isinstance(error, DatabaseAccessRefused):
                        raise  # wrong credentials: waiting would not help
                    self.health.failed(str(error), error.opened_at)
                    if self._outage_too_long():
                        return False
                    self._stop_requested.wait(self.health.backoff(attempt))
                    attempt += 1
            return False
        finally:
            store.close()

    def _start(self) -> None:
        settings = self.settings
        self.observability.start()
        self.ledger.start()
        self.executor.start()
        self.heartbeat.start()
        if self._placement_watcher is not None:
            self._placement_watcher.start()
        self.consumer = Consumer(consumer_config(settings, self.group_id, self.worker_id))
        topics = [topic for q in self.queues for topic in self.topics[q].consumed]
        self.consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        server = self.observability.server
        log.info(
            "worker %s started: queues=%s slots=%d handlers=%s metrics=%s",
            self.worker_id,
            self.queues,
            self.slots,
            "process" if isinstance(self.executor, ProcessExecutor) else "threads",
            server.url if server is not None else "not served here",
        )

    # -- the poll loop -------------------------------------------------------------------------

    def _wake_up(self) -> None:
        """Any thread: the poll thread has something to handle."""
        if not self._wake.is_set():
            self._wake.set()

    def _attempt_finished(self, task: Task) -> None:
        """Executor threads: an attempt ended."""
        self._finished.put([task])
        self._wake_up()

    def _attempts_finished(self, tasks: list[Task]) -> None:
        """Executor threads: attempts ended (a handler process's batch)."""
        self._finished.put(tasks)
        self._wake_up()

    def _loop_once(self) -> None:
        self._follow_database()
        # Cleared before looking at what waits: whatever arrives after the look sets it again.
        self._wake.clear()
        # Never sit in consume() while finished work waits to be handled: that wait, not
        # Postgres, bounded throughput (slots / loop time).
        if not self._finished.empty() or self.completer.unpublished or self.ledger.has_answers:
            timeout = 0.0
        elif (
            self.executor.busy
            or len(self.dispatcher)
            or self.ledger.pending
            or self.publisher.sending
        ):
            timeout = IN_FLIGHT_WAIT_SECONDS
        else:
            timeout = 0.1
        messages = self._read(timeout)
        if messages:
            self.intake.take([m for m in messages if self._usable(m)], between=self._dispatch)
            # What was just read claims its free slots now, not after this round's answers,
            # finished jobs and results (a few milliseconds under load).
            self._dispatch()
        self.intake.route_due()
        self.intake.retry_parked()
        self._check_hot_tenants()
        self.publisher.serve()  # hot-lane copies Kafka now holds: their sources are done
        self._apply_answers()
        self._handle_crashes()
        self.executor.expire()
        self._collect_finished()
        self.completer.flush()
        self._dispatch()
        # Offsets also move without a result (dead letters, duplicates, finished jobs).
        self.partitions.store(self.consumer)
        self.partitions.apply_flow_control(self.consumer)  # no-op while suspended (database away)
        self.events.results_waiting(self.ledger.pending + self.completer.waiting)
        self.observability.observe(
            self.partitions, self.consumer, self.executor.busy, self.slots, self.queue_of_topic
        )
        self.events.flush()

    def _read(self, timeout: float) -> list[Message]:
        """What the consumer holds, waiting at most ``timeout`` for a first message.

        ``consume(n, timeout)`` returns only once it has ``n`` messages or the timeout has
        passed: at a light load every job would wait out the timeout (0-100 ms). ``poll``
        returns with the first message; the rest of what is already fetched follows
        without waiting."""
        batch = self.settings.worker.poll_batch
        room = self.partitions.read_room()
        if room is not None and room < batch:
            if room <= 0:
                # The read-ahead budget is full: nothing is read until results free some of
                # it. The client is asked now and then all the same (for one message): a
                # rebalance's callbacks are served there, and librdkafka drops a member that
                # stops asking for longer than max.poll.interval.ms.
                if time.monotonic() - self._last_read < READ_WHEN_FULL_SECONDS:
                    if timeout > 0:
                        self._wake.wait(min(timeout, IN_FLIGHT_WAIT_SECONDS))
                    return []
                room = 1
            batch = room
        self._last_read = time.monotonic()
        if 0 < timeout <= IN_FLIGHT_WAIT_SECONDS:
            # Work in flight: its answer wakes the loop at once, where a wait in Kafka would
            # sit out the timeout; the fetched messages are taken right after.
            self._wake.wait(timeout)
            return self.consumer.consume(num_messages=batch, timeout=0)
        if timeout <= 0:
            return self.consumer.consume(num_messages=batch, timeout=0)
        first = self.consumer.poll(timeout)
        if first is None:
            return []
        return (
            [first, *self.consumer.consume(num_messages=batch - 1, timeout=0)]
            if batch > 1
            else [first]
        )

    def _usable(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", error)
        return False

    def _follow_database(self) -> None:
        """Pause every partition while the database is away (nothing read can be claimed),
        resume them when it is back; give up past the outage limit."""
        up = self.health.up
        if up != self._database_seen_up:
            self._database_seen_up = up
            if up:
                self.partitions.unsuspend(self.consumer)
            else:
                self.partitions.suspend(self.consumer)
        if not up and self._outage_too_long():
            self.exit_code = EXIT_DATABASE_GONE
            self.stop(immediately=True)

    def _check_hot_tenants(self) -> None:
        """Move a tenant that floods a partition to its queue's hot lane (``HotLane``)."""
        moved = self.hot_lane.check(self.partitions, lambda: self.partitions.lag(self.consumer))
        if not moved:
            return
        tenants = set(moved)
        # Its jobs already read and not claimed go too: they free the window now.
        waiting = self.dispatcher.remove(
            lambda item: (item.queue, item.tenant_id) in tenants and item.tier is None
            and not item.lane
        )  # fmt: skip
        self.intake.divert(waiting)

    def _move_to_lane(self, queue: str, tenant: str, reason: str) -> None:
        self.ledger.claims.submit(EnterLane([(queue, tenant, reason)]))

    def _outage_too_long(self) -> bool:
        limit = self.settings.worker.database_outage_limit_seconds
        if limit is None or self.health.down_for() < limit:
            return False
        log.error(
            "database unreachable for %.0fs (limit %.0fs); stopping", self.health.down_for(), limit
        )
        return True

    # -- claims and starts ---------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Choose the next jobs fairly and hand them to the claims lane in one statement."""
        if self._stop_requested.is_set() or not self.health.up:
            return
        # Per claims lane, one claim running and one gathering: freed slots wait for the next
        # statement rather than each making its own.
        main_full = self.ledger.claims.pending >= 2
        lane_full = self.ledger.lane_claims.pending >= 2
        if main_full and lane_full:
            return
        free = (
            self.slots
            + self.claim_ahead.jobs
            - self.executor.busy
            - self._claiming
            - len(self._ready)
        )
        if free <= 0 or not len(self.dispatcher):
            return

        def runnable(item: WorkItem) -> bool:
            return not (lane_full if item.lane else main_full) and self._type_has_room(item)

        # Each is reserved as it is chosen: that counts it in flight for the next choice.
        chosen = self.dispatcher.pop_many(free, runnable, self._reserve)
        if chosen:
            self._claiming += len(chosen)
            self.intake.claim(chosen)

    def _apply_answers(self) -> None:
        for operation in self.ledger.drain():
            if isinstance(operation, Claim):
                self._claimed(operation)
            elif isinstance(operation, Complete):
                # Each job leaves the completing set with its lease (``_release_hold``), in
                # one step under the lock; one refused and written again stays in it.
                self.completer.applied(operation)
            elif isinstance(operation, SettleWaiting):
                self.intake.settled(operation)
            elif isinstance(operation, CountCrashes):
                self._crashes_counted(operation)
            elif isinstance(operation, EnterLane) and operation.answer is False:
                log.info("an operator's placement keeps the tenant out of the hot lane")

    def _claimed(self, operation: Claim) -> None:
        items: list[WorkItem] = operation.context
        self._claiming -= len(items)
        if operation.answer is not None and not operation.answer.again:
            # Not a claim that waited out an outage: that is no round trip to plan by.
            self.claim_ahead.claim_answered(time.monotonic() - operation.submitted)
        claimed = self.intake.claimed(operation)
        if len(claimed) < len(items):
            leased = {id(item) for item in claimed}
            for item in items:
                if id(item) not in leased:
                    self._unreserve(item)
        self._ready.extend(claimed)
        self._start_ready()
        # What did not start waits for a slot: claimed ahead.
        self.stats["claimed_ahead"] += min(len(self._ready), len(claimed))

    def _start_ready(self) -> None:
        """Start leased jobs in the slots that are free, oldest first. A job's type and
        dependencies are looked at as it starts, so a dependency's permission is taken only
        for a job that runs now (one that waited and was given back took none)."""
        ready = self._ready
        if not ready:
            return
        stopping = self._stop_requested.is_set()
        room = self.slots - self.executor.busy
        starting: list[Task] = []
        started: list[tuple[str, str, str, float | None]] = []
        # One reading of the clocks for the jobs started together.
        monotonic, wall = time.monotonic(), time.time()
        # Looked up once per call: ownership and handlers do not change within it, and the
        # jobs of a batch share a few partitions and job types.
        owned: dict[tuple[str, int], bool] = {}
        types: dict[str, JobType | None] = {}
        owns = self.partitions.owns
        while ready and (stopping or len(starting) < room):
            item = ready.popleft()
            key = (item.topic, item.partition)
            ours = owned.get(key)
            if ours is None:
                ours = owned[key] = owns(*key)
            if stopping or not ours:
                # Claimed as the partition went away or the worker began to stop: give the
                # lease back; the offset stays for the next owner.
                self._unreserve(item)
                self.completer.add(Completion(item, Verdict.released("not started"), 0.0))
                continue
            name = item.job_type
            if name in types:
                job_type = types[name]
            else:
                job_type = types[name] = self.job_type_of(name)
            verdict = (
                self.intake.unknown_type_verdict(item)
                if job_type is None
                else self._dependency_deferral(job_type)
            )
            if verdict is not None:
                self._unreserve(item)
                self.completer.add(Completion(item, verdict, 0.0))
                continue
            assert job_type is not None
            starting.append(self._task(item, job_type, monotonic, wall, started))
        if starting:
            self.stats["executed"] += len(starting)
            self.events.jobs_started(started)
            self.executor.submit(starting)

    def _release_ready(self, which: Callable[[WorkItem], bool], reason: str) -> None:
        """Give back the leases of claimed-ahead jobs that have not started."""
        released: list[WorkItem] = []
        kept: collections.deque[WorkItem] = collections.deque()
        for item in self._ready:
            (released if which(item) else kept).append(item)
        if not released:
            return
        self._ready = kept
        for item in released:
            self._unreserve(item)
        self.release_leases(released, reason)

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

    def _limited(self, name: str) -> JobType | None:
        """The job type ``name`` if it limits how many of its jobs run (``concurrency``,
        ``tenant_concurrency``) or names dependencies, else None: most types do neither,
        and their jobs are neither counted nor checked (a few dictionary updates per job).
        Looked up once per type: the app's job types do not change while the worker runs."""
        limited = self._limited_types
        if name in limited:
            return limited[name]
        job_type = self.app.find(name)
        if job_type is not None and (
            job_type.concurrency is None
            and job_type.tenant_concurrency is None
            and not job_type.dependencies
        ):
            job_type = None
        if len(limited) < LIMITED_TYPES_REMEMBERED:
            limited[name] = job_type
        return job_type

    def _reserve(self, item: WorkItem) -> None:
        self.dispatcher.started(item)
        if self._limited(item.job_type) is None:
            return
        self._type_running[item.job_type] = self._type_running.get(item.job_type, 0) + 1
        key = (item.job_type, item.tenant_id)
        self._type_tenant_running[key] = self._type_tenant_running.get(key, 0) + 1

    def _unreserve(self, item: WorkItem) -> None:
        self.dispatcher.finished(item)
        if self._limited(item.job_type) is None:
            return
        self._type_running[item.job_type] = max(0, self._type_running.get(item.job_type, 1) - 1)
        key = (item.job_type, item.tenant_id)
        count = self._type_tenant_running.get(key, 1) - 1
        if count > 0:
            self._type_tenant_running[key] = count
        else:
            self._type_tenant_running.pop(key, None)

    def unreserve(self, item: WorkItem) -> None:
        """A chosen item goes back to the dispatcher unclaimed (Intake)."""
        self._claiming -= 1
        self._unreserve(item)

    def _type_has_room(self, item: WorkItem) -> bool:
        job_type = self._limited(item.job_type)
        if job_type is None:
            return True
        limit = job_type.concurrency
        if limit is not None and self._type_running.get(item.job_type, 0) >= limit:
            return False
        per_tenant = job_type.tenant_concurrency
        if (
            per_tenant is not None
            and self._type_tenant_running.get((item.job_type, item.tenant_id), 0) >= per_tenant
        ):
            return False
        return not job_type.dependencies or self.guard.ready(job_type.dependencies)

    def _task(
        self,
        item: WorkItem,
        job_type: JobType,
        monotonic: float,
        wall: float,
        started: list[tuple[str, str, str, float | None]],
    ) -> Task:
        """The task of a leased job starting now (``monotonic`` and ``wall``: the clocks); its
        start event goes on ``started`` (reported for the batch, ``WorkerEvents.jobs_started``)."""
        lease = item.lease
        assert lease is not None
        timeout = job_type.timeout or self.settings.worker.default_timeout_seconds
        job_id = item.job_id
        # By position, in the order of JobContext's fields: once per job, and a call by keyword
        # costs twice as much.
        context = JobContext(
            job_id,
            item.queue,
            item.job_type,
            item.tenant_id,
            lease.attempt,
            lease.max_attempts,
            monotonic + timeout,  # deadline
            lease.progress,
            lease.replays,
            item.envelope.idempotency_key,
            None,  # _cancel: made when a handler first waits for it
            None,  # _cancel_reason
            None,  # _cancelled_at
            self.heartbeat,
        )
        task = Task(job_type, item.envelope.payload, context, context.deadline, item)
        self._tasks[job_id] = task
        wait = wall - item.envelope.created_at.timestamp() if lease.attempt == 1 else None
        started.append((item.queue, item.job_type, item.tenant_id, wait))
        return task

    # -- results -------------------------------------------------------------------------------

    def _collect_finished(self) -> None:
        count = 0
        add = self.completer.add
        task_done = self._task_done
        record_dependencies = self._record_dependencies
        while True:
            try:
                tasks = self._finished.get_nowait()
            except queue.Empty:
                break
            count += len(tasks)
            for task in tasks:
                item: WorkItem = task.item
                task_done(item)
                record_dependencies(task)
                verdict = task.verdict
                assert verdict is not None
                add(Completion(item, verdict, task.duration))
        self.claim_ahead.finished(count, time.monotonic())
        # Their slots are free: claimed-ahead jobs take them now, not a loop turn later.
        self._start_ready()

    def _record_dependencies(self, task: Task) -> None:
        names = task.job_type.dependencies
        if not names:
            return
        if task.breaker in ("throttled", "neutral"):
            for name in names:
                self.guard.breaker(name).return_permit()
                if task.breaker == "throttled":
                    self.events.dependency_throttled(name)
            return
        states = self.guard.record(names, task.breaker == "success")
        for name, state in states.items():
            self.events.dependency_call(name, task.duration)
            self.events.breaker_state(name, state)

    def _end_dependencies(self, task: Task, signal: BreakerSignal) -> None:
        """A task that ended without its handler's answer (it crashed its process, or was
        abandoned): its dependencies hear ``signal`` in its place. Unheard, a half-open
        breaker's probe permit stayed out for good, and every later job of the dependency
        was deferred as "dependency busy", in this worker, until it restarted."""
        task.breaker = signal
        self._record_dependencies(task)

    def _abandon(self, tasks: list[Task]) -> list[WorkItem]:
        """Leave behind the handlers of ``tasks`` still running (revoked, or shutting down):
        their slots and dependency permits are free again. Returns their items, whose leases
        the caller gives back."""
        abandoned: list[WorkItem] = []
        for task in tasks:
            if self.executor.abandon(task):
                self._task_done(task.item)
                self._end_dependencies(task, "neutral")
                abandoned.append(task.item)
        return abandoned

    def _task_done(self, item: WorkItem) -> None:
        self._tasks.pop(item.job_id, None)
        self._unreserve(item)

    # -- crashes of the handler process --------------------------------------------------------

    def _handle_crashes(self) -> None:
        """The handler process died with ``tasks`` running. The job that killed it, when it
        left a note, spends its attempt (retried, or dead at its last); the others run again
        at once under their leases. When nobody knows which job did it, each counts the crash
        (not an attempt) and a job at its crash budget is dead as a poison job."""
        while True:
            try:
                tasks, culprit, how = self._crashes.get_nowait()
            except queue.Empty:
                return
            self.events.handler_process_restarted()
            innocent = [task for task in tasks if task is not culprit]
            if culprit is not None:
                self._task_done(culprit.item)
                self._end_dependencies(culprit, "failure")
                self.completer.add(
                    Completion(culprit.item, self._crash_verdict(culprit, how), culprit.duration)
                )
                self._run_again(innocent)
            elif innocent:
                crashed = [
                    (
                        t.context.job_id,
                        t.context.attempt,
                        t.item.lease.claimed_at,
                        int(t.duration * 1000),
                    )
                    for t in innocent
                ]
                self.ledger.claims.submit(CountCrashes(crashed, context=innocent, reason=how))

    def _crash_verdict(self, task: Task, how: str) -> Verdict:
        attempt, max_attempts = task.context.attempt, task.context.max_attempts
        message = f"{how} while running this job (attempt {attempt})"
        if attempt >= max_attempts:
            return Verdict.dead("ProcessCrashed", f"{message}; max attempts reached")
        return Verdict.retrying("ProcessCrashed", message, self.retry_policy.delay(attempt))

    def _crashes_counted(self, operation: CountCrashes) -> None:
        if operation.answer is None:
            # Never ran (stopping, or a fault it logged): the jobs keep their leases until
            # these run out, and their offsets stay unfinished, so they run again.
            for task in operation.context:
                self._task_done(task.item)
                self._end_dependencies(task, "neutral")
                self._release_hold(task.context.job_id)
            return
        crashes = operation.answer
        budget = self.settings.worker.crash_budget
        again: list[Task] = []
        for task in operation.context:
            count = crashes.get(task.context.job_id)
            if count is None:
                # No longer ours (the lease moved on meanwhile): nothing to run or write.
                self._task_done(task.item)
                self._end_dependencies(task, "neutral")
                self._release_hold(task.context.job_id)
                self.mark_done(task.item)
            elif count >= budget:
                self._task_done(task.item)
                self._end_dependencies(task, "failure")
                verdict = Verdict.dead("PoisonJob", crashed_too_often(count, budget))
                self.completer.add(Completion(task.item, verdict, task.duration))
            else:
                again.append(task)
        self._run_again(again)

    def _run_again(self, tasks: list[Task]) -> None:
        """Start crashed attempts again, same lease and attempt (their crash was not theirs)."""
        fresh = []
        monotonic, wall = time.monotonic(), time.time()
        started: list[tuple[str, str, str, float | None]] = []
        for task in tasks:
            item: WorkItem = task.item
            self._tasks.pop(item.job_id, None)
            fresh.append(self._task(item, task.job_type, monotonic, wall, started))
        self.stats["executed"] += len(fresh)
        self.events.jobs_started(started)
        self.executor.submit(fresh)

    # -- leases --------------------------------------------------------------------------------

    def mark_done(self, item: WorkItem) -> None:
        """The item's message is durably handled: its offset may be committed (if its
        partition is still held under the assignment it was read in)."""
        self.partitions.done(item.topic, item.partition, item.offset, item.record.epoch)

    def mark_all_done(self, items: list[WorkItem]) -> None:
        """``mark_done`` of each (the results of one statement)."""
        done = self.partitions.done
        for item in items:
            done(item.topic, item.partition, item.offset, item.record.epoch)

    def hold(self, items: list[WorkItem]) -> None:
        """Leases now ours: heartbeated until their results are settled."""
        with self._held_lock:
            held = self._held
            for item in items:
                held[item.job_id] = item

    def _release_hold(self, job_id: uuid.UUID) -> bool:
        """Forget a lease whose result is settled; True if its loss was reported already."""
        return bool(self._release_holds([job_id]))

    def _release_holds(self, job_ids: list[uuid.UUID]) -> AbstractSet[uuid.UUID]:
        """``_release_hold`` of each, under one lock; returns the jobs whose loss was reported
        already."""
        with self._held_lock:
            forget = self._held.pop
            completed = self._completing.discard
            for job_id in job_ids:
                forget(job_id, None)
                completed(job_id)
            lost = self._lost
            if not lost:  # almost always: no job id to hash (a Python-level __hash__)
                return _NONE_LOST
            already_lost = {job_id for job_id in job_ids if job_id in lost}
            lost.difference_update(already_lost)
        return already_lost

    def _held_ids(self) -> list[uuid.UUID]:
        with self._held_lock:
            return list(self._held)

    def _signal(self, job_id: uuid.UUID, reason: str) -> None:
        task = self._tasks.get(job_id)
        if task is not None:
            self.executor.cancel(task, reason)

    def _lease_lost(self, job_id: uuid.UUID) -> None:
        """Heartbeat thread: a lease we hold is no longer ours (it expired and the job moved
        on). Counted once per job; its handler is asked to stop, its result will be stale."""
        with self._held_lock:
            item = self._held.get(job_id)
            first = item is not None and job_id not in self._lost
            if job_id in self._completing:
                return  # completed, not lost: the result is on its way to the database
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
        self.completer.write(completions)  # a release has no next step: straight to the database

    def _completing_now(self, completions: list[Completion]) -> None:
        with self._held_lock:
            self._completing.update(c.item.job_id for c in completions)

    def _settle_in_time(self, timeout: float) -> None:
        """Let the lanes finish what they were given (bounded: the database may be away) and
        apply their answers."""
        self.ledger.wait_idle(max(0.0, timeout))
        self._apply_answers()

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            fresh = self.partitions.assigned(partitions)
            log.info(
                "assigned %s",
                [(p.topic, p.partition) for p in partitions],
                extra={"worker": self.worker_id},
            )
            if partitions:
                consumer.incremental_assign(partitions)
                # A partition we paused, gave up and got back can come back still paused
                # (the pause outlives the assignment in the client); our state for it starts
                # fresh and unpaused, so the client's must too, or it never flows again.
                # One named again while still ours keeps the pauses it has.
                if fresh and self._database_seen_up:
                    consumer.resume(fresh)
                elif fresh:
                    consumer.pause(fresh)
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
        log.info(
            "%s %s", "lost" if lost else "revoked", sorted(keys), extra={"worker": self.worker_id}
        )

        def ours(item: WorkItem) -> bool:
            return (item.topic, item.partition) in keys

        self.partitions.mark_revoked(keys)
        for topic, partition in keys:
            self.events.partition_revoked(topic, partition)
        self.intake.drop_parked(ours)
        self.intake.drop_waiting(keys)
        self.dispatcher.remove(ours)  # never claimed: the next owner reads them again
        self._release_ready(ours, "partition revoked" if not lost else "partition lost")
        grace = self.settings.worker.revoke_grace_seconds
        if not lost:
            # Results already decided are written; their offsets can be committed.
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(
                ours(t.item) for t in self.executor.running()
            ):
                time.sleep(0.02)
                self.executor.expire()
                self._collect_finished()
                self.completer.flush(now=True)
                self._apply_answers()
        unfinished = [t for t in self.executor.running() if ours(t.item)]
        for task in unfinished:
            self.executor.cancel(task, "revoked")
        abandoned = self._abandon(unfinished)
        self.release_leases(abandoned, "partition revoked" if not lost else "partition lost")
        if not lost:
            self.completer.flush(now=True)
            self._settle_in_time(grace)
            self.publisher.settle(grace)
            # Unbounded, inside the callback: the commit must land before the partitions have
            # a new owner, or it could overwrite the new owner's commit with positions past
            # jobs that owner has given back since (then nobody reads them again).
            self.partitions.commit(self.consumer, keys, timeout=None)
        self.partitions.forget(keys)

    # -- shutdown ------------------------------------------------------------------------------

    def _drain(self) -> None:
        """The deploy contract: no new leases, running jobs finish within the drain window (their
        leases kept alive), the rest are released, offsets committed, then the group is left."""
        settings = self.settings.worker
        if self._drain_deadline is None:
            self._drain_deadline = time.monotonic() + settings.drain_seconds
        log.info("draining %d running jobs", self.executor.busy)
        self.partitions.pause_all(self.consumer)
        self.dispatcher.remove(lambda item: True)
        self.intake.drop_parked(lambda item: True)
        self.intake.drop_waiting(None)
        self._release_ready(lambda item: True, "worker shut down before the job started")
        while (self.executor.busy or self._claiming) and time.monotonic() < self._drain_deadline:
            self.consumer.consume(num_messages=1, timeout=0.05)  # stay in the group
            self._apply_answers()
            self._handle_crashes()
            self.executor.expire()
            self._collect_finished()
            self.completer.flush(now=True)
            self.events.flush()
        for task in self.executor.running():
            self.executor.cancel(task, "shutdown")
        time.sleep(0.2 if self.executor.busy else 0)
        self._collect_finished()
        abandoned = self._abandon(self.executor.running())
        self.release_leases(abandoned, "worker shut down before the job finished")
        for _ in range(3):
            self.completer.flush(now=True)
            if not self.completer.waiting:
                break
        self._settle_in_time(FINAL_WRITE_SECONDS)
        self.publisher.settle(FINAL_WRITE_SECONDS)
        self.partitions.commit(self.consumer, None, timeout=FINAL_WRITE_SECONDS)

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
            lambda: self.executor.stop(timeout=5.0),
            lambda: self.ledger.stop(timeout=5.0),
            self._leave_registry,
            lambda: self.publisher.close(),
            self._stop_placement_watch,
            self.events.flush,
            lambda: self.observability.close(),
        ]
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("error while stopping the worker")
        log.info("worker %s stopped", self.worker_id)

    def _stop_placement_watch(self) -> None:
        if self._placement_watcher is not None:
            self._placement_watcher.stop(2.0)

    def _leave_registry(self) -> None:
        store = JobStore.open(self.settings, self.worker_id, role="worker")
        try:
            store.stop_worker()
        except DatabaseUnavailable as error:
            # Its heartbeat stops: the registry sees it stale, its leases expire.
            log.warning("could not mark the worker stopped: %s", error)
        finally:
            store.close()

    # -- helpers for Intake --

    def job_type_of(self, name: str) -> JobType | None:
        job_type = self.app.find(name)
        return job_type if job_type is not None and job_type.handler is not None else None


__all__ = ["EXIT_DATABASE_GONE", "KafkaException", "Worker", "consumer_config"]
