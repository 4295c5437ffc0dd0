"""The worker: one Kafka consumer-group member per process that runs handlers, with Postgres as
the truth.

One thread (the poll loop) owns the consumer and the worker's state; it never waits on a
handler or on Postgres. Handlers run in the ``Executor`` (a handler process under ``tenantq
worker``, threads otherwise), writes to Postgres go through the ``Ledger``'s lanes, leases are
renewed by the ``Heartbeat`` thread; what those threads hand back arrives in the ``Inbox``.
The loop is a short list of steps over parts, each built here from what it needs:

| part                      | what it owns                                                  |
| ------------------------- | ------------------------------------------------------------- |
| ``Reader``                | reads from the consumer within the read-ahead budget          |
| ``Intake``                | messages to work items: decode, hold until due, divert, DLQ   |
| ``Dispatch``, ``Claims``  | fair choice for the free slots, one claim per round, parking  |
| ``Throttles``             | jobs a tenant's limit held back, until the claim says retry   |
| ``SlotBook``              | slots, claims out, jobs claimed ahead, per-type counts        |
| ``Starter``               | leased jobs to running tasks                                  |
| ``Finisher``              | ended attempts to completions; handler-process crashes        |
| ``Completer``             | completions to Kafka (next steps) and Postgres (results)      |
| ``LeaseBook``             | leases held, completing and lost (shared with the heartbeat)  |
| ``Handover``              | rebalance callbacks and the drain at shutdown                 |
| ``Outage``                | partitions paused while the database is away; its time limit  |

Faults it survives without dying: a database that goes away (it claims nothing, pauses its
partitions, holds results and reconnects with backoff; ``DatabaseHealth``), a handler process
that dies (a new one starts; the jobs that ran beside the culprit run again under their
leases, the culprit's attempt counts), rows the database refuses (those jobs go to the DLQ
with the reason), a broker that restarts (the client reconnects; unacknowledged next steps
are published again).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException

from tenantq.app import App
from tenantq.consumer.claim_ahead import ClaimAhead, default_claim_ahead_limit
from tenantq.consumer.claims import Claims
from tenantq.consumer.completer import Completer
from tenantq.consumer.database_health import EXIT_DATABASE_GONE, DatabaseHealth
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatch import Dispatch, fair_dispatcher
from tenantq.consumer.executor import ProcessExecutor, executor_for
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.group_config import consumer_config
from tenantq.consumer.handover import Handover
from tenantq.consumer.heartbeat import Heartbeat
from tenantq.consumer.hot_lane import HotLane
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.intake import Intake
from tenantq.consumer.leases import LeaseBook
from tenantq.consumer.ledger import Claim, Complete, CountCrashes, EnterLane, Ledger, SettleWaiting
from tenantq.consumer.outage import Outage
from tenantq.consumer.partitions import Key, Partitions
from tenantq.consumer.reader import IN_FLIGHT_WAIT_SECONDS, Reader
from tenantq.consumer.registration import Registration
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.standby_gate import StandbyGate, StandbyWatch
from tenantq.consumer.starts import RunningTasks, Starter
from tenantq.consumer.stopping import StopRequest
from tenantq.consumer.throttles import Throttles
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.errors import DatabaseUnavailable
from tenantq.kafka_access import check_kafka_access
from tenantq.observability.worker import WorkerObservability
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Publisher
from tenantq.quotas.book import QuotaBook
from tenantq.quotas.shares import ShareBook, ShareSync
from tenantq.quotas.watcher import QuotaWatcher
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore
from tenantq.topics import consumer_group

log = logging.getLogger("tenantq.worker")

#: The poll loop's wait in Kafka when nothing is in flight.
IDLE_WAIT_SECONDS = 0.1


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
        # Set here and never changed: read by any thread.
        self.app = app
        self.settings = settings = settings or app.settings
        self.queues = queues or app.queues() or ["default"]
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.slots = concurrency or settings.worker.concurrency
        self.retry_policy = retry_policy or RetryPolicy()
        self._install_signal_handlers = install_signal_handlers
        self._topics = TopicMap.of(settings, self.queues)
        #: Set by the poll thread when the database stayed away too long.
        self.exit_code = 0
        #: Counters (poll thread writes; anyone may read).
        self.stats = dict.fromkeys(("succeeded", "stale_refused", "executed", "claimed_ahead"), 0)
        self.observability = WorkerObservability(settings, self.queues)
        #: Where the worker reports what happens (the metrics subscribe here; any thread).
        self.events: WorkerEvents = self.observability.metrics
        #: Dependencies' rate limits and breakers (poll thread).
        self.guard = DependencyGuard(policies_from(app.dependencies))
        # The parts' own classes say which thread owns each.
        self._stop = stop = StopRequest(settings.worker.drain_seconds)
        self._inbox = inbox = Inbox()
        self._health = health = DatabaseHealth(on_change=self.events.database_up)
        self._ledger = ledger = Ledger(
            lambda lane: JobStore.open(settings, self.worker_id, role=f"worker-{lane}"),
            health,
            on_answer=inbox.wake,
        )
        self._consumer = Consumer(consumer_config(settings, self.group_id, self.worker_id))
        self._publisher = Publisher(settings, f"tenantq-worker-{self.worker_id}")
        self._executor = executor_for(
            app_reference, self.slots, settings, self.worker_id, self.retry_policy, inbox
        )
        self._dispatcher = fair_dispatcher(settings, self.queues, self.slots, strict_priority)
        windows = settings.worker.read_ahead_per_partition
        lane_windows = settings.tenant_isolation.lane_read_ahead_per_partition
        topics = self._topics
        standbys = settings.worker.offsets_wait_for_standbys
        self._partitions = Partitions(
            windows, lane_windows, topics.lanes, topics.mains, commit_stored_only=standbys > 0
        )
        #: With standbys to wait for, offsets are stored behind them (poll thread), as the
        #: watch (its own thread) reads the primary; ``tenantq.consumer.standby_gate``.
        self._standby_watch = (
            StandbyWatch.for_worker(settings, self.worker_id) if standbys else None
        )
        self._standby_gate = (
            StandbyGate(self._standby_watch, self._partitions, self._consumer)
            if self._standby_watch is not None
            else None
        )
        limit = settings.worker.database_outage_limit_seconds
        self._outage = outage = Outage(health, limit, self._partitions, self._consumer)
        self._registration = Registration(
            settings, self.worker_id, self.queues, self.slots, health, outage.too_long, stop
        )
        #: The deployment's tenant limits, as this worker knows them (any thread reads).
        self._quota_book = book = QuotaBook(settings.tenant_defaults)
        self._quota_watcher = QuotaWatcher(settings, book)
        #: This member's view of its queues' shares by weight, synced with the fleet's.
        self._shares = ShareBook(book.weight)
        self._share_sync = ShareSync(settings, self._shares, lambda: book.fair_of(self.queues))
        self._hot_lane = HotLane.for_worker(
            settings,
            topics.queue_of_main,
            self.events,
            lambda queue, tenant, why: ledger.claims.submit(EnterLane([(queue, tenant, why)])),
        )
        self._build_parts()

    def _build_parts(self) -> None:
        """The loop's parts, each given the few things it uses."""
        settings, events, stats = self.settings, self.events, self.stats
        executor, ledger, partitions = self._executor, self._ledger, self._partitions
        stop, health = self._stop, self._health
        running = RunningTasks(executor.cancel)
        leases = LeaseBook(expired=events.lease_expired, cancel=running.cancel)
        self._heartbeat = Heartbeat(
            JobStore.open(settings, self.worker_id, role="worker-heartbeat"),
            health,
            interval=settings.worker.heartbeat_interval_seconds,
            lease_seconds=settings.worker.lease_seconds,
            held=leases.held_ids,
            usage=lambda: (min(executor.busy, self.slots), self.slots),
            on_cancel=lambda job_id: running.cancel(job_id, "operator"),
            on_lost=leases.lost,
        )
        self._completer = completer = Completer(
            settings=settings,
            topics=self._topics.by_queue,
            worker_id=self.worker_id,
            publish=self._publisher.publish,
            results=ledger.results,
            events=events,
            release_holds=leases.release,
            mark_done=partitions.done_items,
            completing=leases.completing,
            stats=stats,
        )
        ahead_limit = settings.worker.claim_ahead_limit
        slots = SlotBook(
            self.slots,
            ClaimAhead(
                default_claim_ahead_limit(self.slots) if ahead_limit is None else ahead_limit,
                time.monotonic(),
            ),
            find_type=self.app.find,
            tenants=self._dispatcher,
            dependencies_ready=self.guard.ready,
        )
        self._intake = intake = Intake(
            settings=settings,
            topics=self._topics,
            worker_id=self.worker_id,
            partitions=partitions,
            consumer=self._consumer,
            publisher=self._publisher,
            events=events,
            in_lane=self._hot_lane.in_lane,
            find_type=self.app.find,
            admit=self._dispatcher.push,
        )
        worker_settings = settings.worker
        dispatcher = self._dispatcher
        self._throttles = throttles = Throttles(
            push=dispatcher.push,
            held_back=partitions.hold_back,
            events=events,
            worker_id=self.worker_id,
        )

        in_lane = self._hot_lane.in_lane

        def more_waiting(queue: str, tenant: str) -> bool:
            # A tenant in the hot lane floods: its backlog is the lane's, read by every
            # member a few at a time, and rarely in one member's hands.
            return (
                dispatcher.waiting(queue, tenant)
                or dispatcher.waiting(f"{queue}{HOT_LANE_SUFFIX}", tenant)
                or throttles.waiting(queue, tenant)
                or in_lane(queue, tenant)
            )

        self._claims = claims = Claims(
            main=ledger.claims,
            lane=ledger.lane_claims,
            settings=worker_settings,
            worker_id=self.worker_id,
            topics=self._topics.by_queue,
            events=events,
            hold=leases.hold,
            mark_done=partitions.done_items,
            push=self._dispatcher.push,
            unclaimed=slots.unclaimed,
            publish=intake.publish_and_mark,
            quotas=self._quota_book,
            shares=self._shares,
            throttles=throttles,
            more_waiting=more_waiting,
        )
        self._starter = starter = Starter(
            settings=worker_settings,
            slots=slots,
            executor=executor,
            running=running,
            owns=partitions.owns,
            find_type=self.app.find,
            guard=self.guard,
            leases=self._heartbeat,
            complete=completer.add,
            release=completer.release,
            events=events,
            retry_policy=self.retry_policy,
            stats=stats,
            stopping=stop.is_set,
        )
        self._dispatch = Dispatch(
            dispatcher=self._dispatcher,
            slots=slots,
            claims=claims,
            busy=lambda: executor.busy,
            may_claim=lambda: not stop.is_set() and health.up,
            start_ready=starter.start_ready,
            stats=stats,
        )
        self._finisher = finisher = Finisher(
            inbox=self._inbox,
            running=running,
            slots=slots,
            executor=executor,
            guard=self.guard,
            events=events,
            complete=completer.add,
            release_leases=leases.release,
            mark_done=partitions.done_items,
            count_crashes=ledger.claims.submit,
            start_ready=starter.start_ready,
            run_again=starter.run_again,
            retry_policy=self.retry_policy,
            crash_budget=worker_settings.crash_budget,
        )
        self._handover = Handover(
            settings=worker_settings,
            worker_id=self.worker_id,
            consumer=self._consumer,
            partitions=partitions,
            events=events,
            executor=executor,
            finisher=finisher,
            completer=completer,
            publisher=self._publisher,
            forget_unstarted=self._forget_unstarted,
            apply_answers=self._apply_answers,
            wait_idle=ledger.wait_idle,
            claiming=lambda: slots.claiming,
            database_up=lambda: self._outage.seen_up,
            store_offsets=self._settle_offsets,
        )
        self._reader = Reader(
            self._consumer, worker_settings.poll_batch, partitions.read_room, self._inbox.wait
        )

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def group_id(self) -> str:
        """One consumer per process joins one group: the queue's own, or for a worker of
        several queues, the group of that queue set (run every worker of those queues with the
        same set)."""
        return consumer_group(self.settings.topic_prefix, "+".join(sorted(self.queues)))

    @property
    def owned_partitions(self) -> set[tuple[str, int]]:
        """The partitions this member owns now (a snapshot; any thread)."""
        return {key for key in list(self._partitions.states) if self._partitions.owns(*key)}

    def stop(self, *, immediately: bool = False) -> None:
        """Ask for a graceful stop (thread-safe); ``immediately`` skips the drain window."""
        self._stop.request(immediately=immediately)

    def run(self) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT (a second signal shortens the drain).

        Raises ``KafkaAccessRefused`` or ``DatabaseAccessRefused`` at start when the cluster or the
        database refuses the settings' credentials or TLS; a server that is down is waited
        for instead."""
        if self._install_signal_handlers and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        try:
            # Credentials the cluster refuses are a one-line error now, not a silent wait.
            check_kafka_access(self.settings, stopping=self._stop.is_set)
            entered = self._registration.enter()
        except BaseException:
            self._consumer.close()  # never subscribed: nothing to leave
            raise
        if not entered:
            self._consumer.close()  # never subscribed: nothing to leave
            return
        self._start()
        try:
            while not self._stop.is_set():
                self._loop_once()
            self._handover.drain(self._stop.drain_deadline)
        finally:
            self._close()

    def _start(self) -> None:
        self.observability.start()
        self._ledger.start()
        self._executor.start()
        self._heartbeat.start()
        self._quota_watcher.start()
        self._share_sync.start()
        self._hot_lane.start()
        if self._standby_watch is not None:
            self._standby_watch.start()
        handover = self._handover
        self._consumer.subscribe(
            self._topics.consumed,
            on_assign=handover.assigned,
            on_revoke=handover.revoked,
            on_lost=handover.lost,
        )
        server = self.observability.server
        log.info(
            "worker %s started: queues=%s slots=%d handlers=%s metrics=%s",
            self.worker_id,
            self.queues,
            self.slots,
            "process" if isinstance(self._executor, ProcessExecutor) else "threads",
            server.url if server is not None else "not served here",
        )

    # -- the poll loop -------------------------------------------------------------------------

    def _loop_once(self) -> None:
        self._follow_database()
        self._inbox.clear()
        messages = self._reader.read(self._read_timeout())
        if messages:
            self._intake.take(messages, between=self._dispatch.round)
            # What was just read claims its free slots now, not after this round's answers,
            # finished jobs and results (a few milliseconds under load).
            self._dispatch.round()
        self._intake.route_due()
        self._claims.retry_parked()
        self._throttles.release_due()
        self._check_hot_tenants()
        self._publisher.serve()  # hot-lane copies Kafka now holds: their sources are done
        self._apply_answers()
        self._finisher.handle_crashes()
        self._executor.expire()
        self._finisher.collect()
        self._completer.flush()
        self._dispatch.round()
        # Offsets also move without a result (dead letters, duplicates, finished jobs).
        self._store_offsets()
        self._partitions.apply_flow_control(self._consumer)  # no-op while the database is away
        self._observe()

    def _read_timeout(self) -> float:
        """Never wait in Kafka while finished work waits (that wait would bound throughput:
        slots / loop time); with work in flight, wait on the inbox, which its answer wakes."""
        if self._inbox.has_finished or self._completer.unpublished or self._ledger.has_answers:
            return 0.0
        waiting = self._executor.busy or len(self._dispatcher)  # running, or to be chosen
        if waiting or self._ledger.pending or self._publisher.sending:
            return IN_FLIGHT_WAIT_SECONDS
        # Jobs held back by a limit wake the loop when their time to ask again comes.
        due = self._throttles.next_due()
        if due is not None:
            return min(IDLE_WAIT_SECONDS, max(0.0, due - time.monotonic()))
        return IDLE_WAIT_SECONDS

    def _observe(self) -> None:
        self.events.results_waiting(self._ledger.pending + self._completer.waiting)
        busy, queue_of = self._executor.busy, self._topics.queue_of
        self.observability.observe(self._partitions, self._consumer, busy, self.slots, queue_of)
        self.events.flush()

    def _follow_database(self) -> None:
        if not self._outage.follow():
            self.exit_code = EXIT_DATABASE_GONE
            self.stop(immediately=True)

    def _check_hot_tenants(self) -> None:
        """Move a tenant that floods a partition to its queue's hot lane (``HotLane``); its
        jobs already read and not claimed go too: they free the window now."""
        partitions = self._partitions
        moved = self._hot_lane.check(partitions, lambda: partitions.lag(self._consumer))
        if not moved:
            return
        tenants = set(moved)

        def moving(item: WorkItem) -> bool:
            return (item.queue, item.tenant_id) in tenants and item.tier is None and not item.lane

        # Held back by a limit or not: every job of theirs read here and not claimed.
        waiting = self._dispatcher.remove(moving)
        self._throttles.let_go(waiting)
        self._intake.divert(waiting + self._throttles.take(moving))

    def _apply_answers(self) -> None:
        """Hand what the ledger's lanes answered to the part that asked."""
        for operation in self._ledger.drain():
            if isinstance(operation, Claim):
                self._dispatch.claimed(operation)
            elif isinstance(operation, Complete):
                # Each job leaves the completing set with its lease, in one step under the
                # lease book's lock; one refused and written again stays in it.
                self._completer.applied(operation)
                if operation.answer is not None and len(self._throttles):
                    # Their leases ended: a tenant held back by its cap has room here.
                    self._throttles.results_written(c.item for c in operation.context)
            elif isinstance(operation, SettleWaiting):
                self._claims.settled(operation)
            elif isinstance(operation, CountCrashes):
                self._finisher.crashes_counted(operation)
            elif isinstance(operation, EnterLane) and operation.answer is False:
                log.info("an operator's placement keeps the tenant out of the hot lane")

    def _forget_unstarted(
        self, which: Callable[[WorkItem], bool], keys: set[Key] | None, reason: str
    ) -> None:
        """Forget the work not started that ``which`` matches (of the partitions ``keys``,
        all when None): never claimed, it stays uncommitted, so the next owner reads it
        again; claimed ahead, its lease is given back with ``reason``."""
        self._claims.drop_parked(which)
        self._throttles.take(which)
        self._intake.drop_waiting(keys)
        self._throttles.let_go(self._dispatcher.remove(which))
        self._starter.give_back_ready(which, reason)

    def _store_offsets(self) -> None:
        """Store the commit positions that moved: at once, or behind the standbys; after a
        failover the gate reports, read every partition again."""
        gate = self._standby_gate
        if gate is None:
            self._partitions.store(self._consumer)
        elif not gate.store():
            self._handover.rewind(self._release_own_leases)
            gate.rewound()

    def _settle_offsets(self, timeout: float) -> None:
        """Before a commit: store what may be stored, waiting at most ``timeout`` seconds for
        the standbys."""
        if self._standby_gate is None:
            self._partitions.store(self._consumer)
        else:
            self._standby_gate.settle(timeout)

    def _release_own_leases(self) -> bool:
        """After a failover: give back every lease this worker holds on the new primary (its
        jobs were given up); False when the database could not be reached."""
        store = JobStore.open(self.settings, self.worker_id, role="worker")
        try:
            released = store.release_own_leases(
                "the database failed over; the job runs again from its message"
            )
        except DatabaseUnavailable as error:
            log.warning("could not give back the leases after the failover: %s", error)
            return False
        finally:
            store.close()
        log.warning("gave back %d leases left from before the failover", len(released))
        return True

    def _close(self) -> None:
        steps: list[Callable[[], object]] = [
            self._handover.leave_group,
            self._stop_standby_watch,
            self._heartbeat.stop,
            lambda: self._executor.stop(timeout=5.0),
            lambda: self._ledger.stop(timeout=5.0),
            self._registration.leave,
            self._publisher.close,
            lambda: self._quota_watcher.stop(2.0),
            lambda: self._share_sync.stop(2.0),
            self._hot_lane.stop,
            self.events.flush,
            self.observability.close,
        ]
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("error while stopping the worker")
        log.info("worker %s stopped", self.worker_id)

    def _stop_standby_watch(self) -> None:
        if self._standby_watch is not None:
            self._standby_watch.stop()


__all__ = ["EXIT_DATABASE_GONE", "KafkaException", "Worker", "consumer_config"]
