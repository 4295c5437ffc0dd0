"""The worker: one Kafka consumer-group member per process that runs handlers, with Postgres as
the truth.

One thread (the poll loop) owns the consumer and the worker's state; it never waits on a
handler or on Postgres. Handlers run in the ``Executor`` (a handler process under ``tenantq
worker``, threads otherwise), writes to Postgres go through the ``Ledger``'s lanes, leases are
renewed by the ``Heartbeat`` thread; what those threads hand back arrives in the ``Inbox``.
The loop is a short list of steps over parts, each built from what it needs (here, or in
``tenantq.consumer.member`` where both kinds of worker build it the same way):

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
| ``OffsetStoring``         | commit positions stored at once or behind the standbys        |
| ``TenantLimits``          | the tenant limits and shares the claims read, kept fresh      |

Faults it survives without dying: a database that goes away (it claims nothing, pauses its
partitions, holds results and reconnects with backoff; ``DatabaseHealth``), a handler process
that dies (a new one starts; the jobs that ran beside the culprit run again under their
leases, the culprit's attempt counts), rows the database refuses (those jobs go to the DLQ
with the reason), a broker that restarts (the client reconnects; unacknowledged next steps
are published again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Unpack

from confluent_kafka import Consumer, KafkaException

from tenantq.app import App
from tenantq.consumer.database_health import EXIT_DATABASE_GONE
from tenantq.consumer.executor import ProcessExecutor
from tenantq.consumer.group_config import consumer_config
from tenantq.consumer.handover import Handover
from tenantq.consumer.hot_lane import HotLane
from tenantq.consumer.ledger import Complete, EnterLane
from tenantq.consumer.member import IDLE_WAIT_SECONDS, LoopParts, Member, MemberOptions
from tenantq.consumer.offset_storing import OffsetStoring
from tenantq.consumer.outage import Outage
from tenantq.consumer.partitions import Key, Partitions
from tenantq.consumer.reader import Reader
from tenantq.consumer.registration import Registration
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.kafka_access import check_kafka_access
from tenantq.quotas.limits_in_use import TenantLimits
from tenantq.settings import Settings
from tenantq.topics import consumer_group

log = logging.getLogger("tenantq.worker")


class Worker:
    """Runs the handlers of ``app`` for ``queues`` as one member of each queue's group.

    Several queues are served by weight (``TENANTQ_QUEUES`` weights) or, with
    ``strict_priority=True``, strictly in the order given among the jobs already read. With
    ``app_reference`` (``"module:attribute"`` naming ``app``, as ``tenantq worker`` passes it)
    handlers run in a handler process, so that one that kills its process costs a new handler
    process, never this member; without it they run in this process's threads. The other
    options (``settings``, ``concurrency``, ``worker_id``, ``retry_policy``) are
    ``MemberOptions``.
    """

    def __init__(
        self,
        app: App,
        queues: list[str] | None = None,
        *,
        strict_priority: bool = False,
        install_signal_handlers: bool = True,
        **options: Unpack[MemberOptions],
    ) -> None:
        self._member = member = Member(app, queues, strict_priority=strict_priority, **options)
        # Set here and never changed: read by any thread.
        self.app, self.settings, self.queues = app, member.settings, member.queues
        self.worker_id, self.slots = member.worker_id, member.slots
        self.retry_policy = member.retry_policy
        #: Counters, metrics, the events the metrics subscribe to, dependencies' guard.
        self.stats, self.observability = member.stats, member.observability
        self.events, self.guard = member.events, member.guard
        #: Set by the poll thread when the database stayed away too long.
        self.exit_code = 0
        self._install_signal_handlers = install_signal_handlers
        self._consumer = Consumer(consumer_config(self.settings, self.group_id, self.worker_id))
        self._build_parts(member, member.settings, member.topics)

    def _build_parts(self, member: Member, settings: Settings, topics: TopicMap) -> None:
        """The loop's parts, each given the few things it uses."""
        consumer, dispatcher, ledger = self._consumer, member.dispatcher, member.ledger
        self._partitions = partitions = Partitions(
            settings.worker.read_ahead_per_partition,
            settings.tenant_isolation.lane_read_ahead_per_partition,
            topics.lanes,
            topics.mains,
            commit_stored_only=settings.worker.offsets_wait_for_standbys > 0,
        )
        self._offsets = OffsetStoring(settings, self.worker_id, partitions, consumer)
        self._outage = Outage(
            member.health, settings.worker.database_outage_limit_seconds, partitions, consumer
        )
        self._registration = Registration(
            settings,
            self.worker_id,
            self.queues,
            self.slots,
            member.health,
            self._outage.too_long,
            member.stop,
        )
        #: The deployment's tenant limits and this member's shares, as it knows them.
        self._limits = TenantLimits(settings, self.queues)
        self._hot_lane = hot_lane = HotLane.for_worker(
            settings,
            topics.queue_of_main,
            self.events,
            lambda queue, tenant, why: ledger.claims.submit(EnterLane([(queue, tenant, why)])),
        )
        self._throttles = throttles = member.throttles(partitions.hold_back)

        def more_waiting(queue: str, tenant: str) -> bool:
            # A tenant in the hot lane floods: its backlog is the lane's, read by every
            # member a few at a time, and rarely in one member's hands.
            return (
                dispatcher.waiting(queue, tenant)
                or dispatcher.waiting(f"{queue}{HOT_LANE_SUFFIX}", tenant)
                or throttles.waiting(queue, tenant)
                or hot_lane.in_lane(queue, tenant)
            )

        self._parts = parts = LoopParts.build(
            member,
            partitions,
            consumer=consumer,
            in_lane=hot_lane.in_lane,
            limits=self._limits,
            throttles=throttles,
            more_waiting=more_waiting,
        )
        self._handover = Handover(
            settings=settings.worker,
            worker_id=self.worker_id,
            consumer=consumer,
            partitions=partitions,
            events=self.events,
            executor=member.executor,
            finisher=parts.finisher,
            completer=parts.completer,
            publisher=member.publisher,
            forget_unstarted=self._forget_unstarted,
            apply_answers=self._apply_answers,
            wait_idle=ledger.wait_idle,
            claiming=lambda: parts.slots.claiming,
            database_up=lambda: self._outage.seen_up,
            store_offsets=self._offsets.settle,
        )
        self._reader = Reader(
            consumer, settings.worker.poll_batch, partitions.read_room, member.inbox.wait
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
        self._member.stop.request(immediately=immediately)

    def run(self) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT (a second signal shortens the drain).

        Raises ``KafkaAccessRefused`` or ``DatabaseAccessRefused`` at start when the cluster or the
        database refuses the settings' credentials or TLS; a server that is down is waited
        for instead."""
        stop = self._member.stop
        if self._install_signal_handlers:
            self._member.install_stop_signals(self.stop)
        try:
            # Credentials the cluster refuses are a one-line error now, not a silent wait.
            check_kafka_access(self.settings, stopping=stop.is_set)
            entered = self._registration.enter()
        except BaseException:
            self._consumer.close()  # never subscribed: nothing to leave
            raise
        if not entered:
            self._consumer.close()  # never subscribed: nothing to leave
            return
        self._start()
        try:
            while not stop.is_set():
                self._loop_once()
            self._handover.drain(stop.drain_deadline)
        finally:
            self._close()

    def _start(self) -> None:
        self._member.start()
        self._parts.heartbeat.start()
        self._limits.start()
        self._hot_lane.start()
        self._offsets.start()
        handover = self._handover
        self._consumer.subscribe(
            self._member.topics.consumed,
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
            "process" if isinstance(self._member.executor, ProcessExecutor) else "threads",
            server.url if server is not None else "not served here",
        )

    # -- the poll loop -------------------------------------------------------------------------

    def _loop_once(self) -> None:
        parts = self._parts
        self._follow_database()
        self._member.inbox.clear()
        messages = self._reader.read(self._read_timeout())
        if messages:
            parts.intake.take(messages, between=parts.dispatch.round)
            # What was just read claims its free slots now, not after this round's answers,
            # finished jobs and results (a few milliseconds under load).
            parts.dispatch.round()
        parts.intake.route_due()
        parts.claims.retry_parked()
        self._throttles.release_due()
        self._check_hot_tenants()
        parts.settle_round(self._member, self._apply_answers)
        # Offsets also move without a result (dead letters, duplicates, finished jobs).
        self._offsets.store(self._handover.rewind)
        self._partitions.apply_flow_control(self._consumer)  # no-op while the database is away
        self._observe()

    def _read_timeout(self) -> float:
        """As the loop parts say; when idle, jobs held back by a limit wake the loop when
        their time to ask again comes."""
        timeout = self._parts.read_timeout(self._member)
        if timeout != IDLE_WAIT_SECONDS:
            return timeout
        due = self._throttles.next_due()
        return timeout if due is None else min(timeout, max(0.0, due - time.monotonic()))

    def _observe(self) -> None:
        member = self._member
        self.events.results_waiting(member.ledger.pending + self._parts.completer.waiting)
        busy, queue_of = member.executor.busy, member.topics.queue_of
        self.observability.observe(
            self._partitions.progress, self._consumer, busy, self.slots, queue_of
        )
        self.events.flush()

    def _follow_database(self) -> None:
        if not self._outage.follow():
            self.exit_code = EXIT_DATABASE_GONE
            self.stop(immediately=True)

    def _check_hot_tenants(self) -> None:
        """Move a tenant that floods a partition to its queue's hot lane (``HotLane``); its
        jobs already read and not claimed go too: they free the window now."""
        partitions = self._partitions
        moved = self._hot_lane.check(partitions, lambda: partitions.progress.lag(self._consumer))
        if not moved:
            return
        tenants = set(moved)

        def moving(item: WorkItem) -> bool:
            return (item.queue, item.tenant_id) in tenants and item.tier is None and not item.lane

        # Held back by a limit or not: every job of theirs read here and not claimed.
        waiting = self._member.dispatcher.remove(moving)
        self._throttles.let_go(waiting)
        self._parts.intake.divert(waiting + self._throttles.take(moving))

    def _apply_answers(self) -> None:
        """Hand what the ledger's lanes answered to the part that asked."""
        self._parts.apply_answers(self._member.ledger, self._results_written)

    def _results_written(self, operation: Complete) -> None:
        if operation.answer is not None and len(self._throttles):
            # Their leases ended: a tenant held back by its cap has room here.
            self._throttles.results_written(c.item for c in operation.context)

    def _forget_unstarted(
        self, which: Callable[[WorkItem], bool], keys: set[Key] | None, reason: str
    ) -> None:
        """Forget the work not started that ``which`` matches (of the partitions ``keys``,
        all when None): never claimed, it stays uncommitted, so the next owner reads it
        again; claimed ahead, its lease is given back with ``reason``."""
        self._parts.claims.drop_parked(which)
        self._throttles.take(which)
        self._parts.intake.drop_waiting(keys)
        self._throttles.let_go(self._member.dispatcher.remove(which))
        self._parts.starter.give_back_ready(which, reason)

    def _close(self) -> None:
        self._member.close(
            [self._handover.leave_group, self._offsets.stop, self._parts.heartbeat.stop],
            self._registration.leave,
            [self._limits.stop, self._hot_lane.stop],
            "worker",
        )
        log.info("worker %s stopped", self.worker_id)


__all__ = ["EXIT_DATABASE_GONE", "KafkaException", "Worker", "consumer_config"]
