"""What a worker of either kind (a consumer-group member, a share-group member) is built on,
and the parts of its poll loop that do not depend on how it reads.

``Member`` holds the identity and the shared machinery: counters, metrics, the inbox the
threads answer into, the ledger's lanes to Postgres, the publisher, the executor and the
dispatcher. ``LoopParts`` are the steps between a message read and its durable end, each
built from the few callables it uses; what a worker reads from (``Source``: partitions or a
share group's records) is the only thing the two kinds hand in differently.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from tenantq.app import App
from tenantq.closing import close_in_order
from tenantq.consumer.claim_ahead import ClaimAhead, default_claim_ahead_limit
from tenantq.consumer.claims import Claims
from tenantq.consumer.completer import Completer
from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatch import Dispatch, fair_dispatcher
from tenantq.consumer.executor import executor_for
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.heartbeat import Heartbeat
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.intake import Intake, ReadPositions
from tenantq.consumer.leases import LeaseBook
from tenantq.consumer.ledger import Claim, Complete, CountCrashes, EnterLane, Ledger, SettleWaiting
from tenantq.consumer.reader import IN_FLIGHT_WAIT_SECONDS
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.starts import RunningTasks, Starter
from tenantq.consumer.stopping import StopRequest
from tenantq.consumer.throttles import Throttles
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker import WorkerObservability
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Publisher
from tenantq.quotas.limits_in_use import TenantLimits
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")

#: One step of closing a worker.
Step = Callable[[], object]

#: The poll loop's wait in Kafka when nothing is in flight.
IDLE_WAIT_SECONDS = 0.1


def new_worker_id() -> str:
    """A worker id unique on the host: host name, process id and a random tail."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class MemberOptions(TypedDict, total=False):
    """What a worker of either kind takes besides its app and queues: its ``settings`` (the
    app's by default), ``concurrency`` (``TENANTQ_WORKER__CONCURRENCY`` by default), its
    ``worker_id`` (host, process and a random tail by default), the ``retry_policy``, and the
    ``app_reference`` (``"module:attribute"`` naming the app) under which handlers run in a
    handler process."""

    settings: Settings | None
    concurrency: int | None
    worker_id: str | None
    retry_policy: RetryPolicy | None
    app_reference: str | None


class Member:
    """A worker's identity and shared machinery, each part built once here (the parts'
    own classes say which thread owns each)."""

    def __init__(
        self,
        app: App,
        queues: list[str] | None,
        *,
        strict_priority: bool = False,
        **options: Unpack[MemberOptions],
    ) -> None:
        settings = options.get("settings")
        worker_id = options.get("worker_id")
        # Set here and never changed: read by any thread.
        self.app = app
        self.settings = settings = settings or app.settings
        self.queues = queues or app.queues() or ["default"]
        self.worker_id = worker_id = worker_id or new_worker_id()
        self.slots = options.get("concurrency") or settings.worker.concurrency
        self.retry_policy = options.get("retry_policy") or RetryPolicy()
        self.topics = TopicMap.of(settings, self.queues)
        #: Counters (poll thread writes; anyone may read).
        self.stats = dict.fromkeys(("succeeded", "stale_refused", "executed", "claimed_ahead"), 0)
        self.observability = WorkerObservability(settings, self.queues)
        #: Where the worker reports what happens (the metrics subscribe here; any thread).
        self.events: WorkerEvents = self.observability.metrics
        #: Dependencies' rate limits and breakers (poll thread).
        self.guard = DependencyGuard(policies_from(app.dependencies))
        self.stop = StopRequest(settings.worker.drain_seconds)
        self.inbox = inbox = Inbox()
        self.health = health = DatabaseHealth(on_change=self.events.database_up)
        self.ledger = Ledger(
            lambda lane: JobStore.open(settings, worker_id, role=f"worker-{lane}"),
            health,
            on_answer=inbox.wake,
            claim_connections=settings.worker.claim_connections,
        )
        self.publisher = Publisher(settings, f"tenantq-worker-{worker_id}")
        self.executor = executor_for(
            options.get("app_reference"), self.slots, settings, worker_id, self.retry_policy, inbox
        )
        self.dispatcher = fair_dispatcher(settings, self.queues, self.slots, strict_priority)

    def throttles(self, held_back: Callable[[Iterable[WorkItem], int], None]) -> Throttles:
        """The book of jobs a tenant's limit held back; ``held_back`` tells the source."""
        return Throttles(
            push=self.dispatcher.push,
            held_back=held_back,
            events=self.events,
            worker_id=self.worker_id,
        )

    def may_claim(self) -> bool:
        """Not stopping, and the database answers."""
        return not self.stop.is_set() and self.health.up

    def install_stop_signals(self, stop: Callable[[], None]) -> None:
        """SIGTERM and SIGINT call ``stop`` (from the main thread only: elsewhere Python
        refuses to install handlers)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop())
            signal.signal(signal.SIGINT, lambda *_: stop())

    def start(self) -> None:
        """Start the threads every worker has."""
        self.observability.start()
        self.ledger.start()
        self.executor.start()

    def close(
        self,
        first: list[Step],
        leave: Step,
        then: list[Step],
        what: str,
    ) -> None:
        """Close in order: ``first`` (leave the group, stop the worker's own threads), the
        handlers, the ledger's lanes (their last writes), ``leave`` (the registration), the
        publisher, ``then``, and the metrics last; a step that fails is logged and passed
        over (``close_in_order``)."""
        steps: list[Step] = [
            *first,
            lambda: self.executor.stop(timeout=5.0),
            lambda: self.ledger.stop(timeout=5.0),
            leave,
            self.publisher.close,
            *then,
            self.events.flush,
            self.observability.close,
        ]
        close_in_order(steps, log, what)


class Source(ReadPositions, Protocol):
    """What the loop parts need of where messages come from, beyond the intake's needs:
    to mark items done."""

    def done_items(self, items: Iterable[WorkItem]) -> None: ...


@dataclass(frozen=True)
class LoopParts:
    """The steps between a message read and its durable end (poll thread, but for the
    heartbeat's own thread)."""

    running: RunningTasks
    leases: LeaseBook
    heartbeat: Heartbeat
    completer: Completer
    slots: SlotBook
    intake: Intake
    claims: Claims
    starter: Starter
    dispatch: Dispatch
    finisher: Finisher

    @classmethod
    def build(
        cls,
        member: Member,
        source: Source,
        *,
        consumer: Any,
        in_lane: Callable[[str, str], bool],
        limits: TenantLimits,
        throttles: Throttles,
        more_waiting: Callable[[str, str], bool],
    ) -> LoopParts:
        """Each part given the few things it uses: ``source`` marks messages done, the
        ``consumer`` is only paused and resumed by the intake."""
        settings, events, stats = member.settings, member.events, member.stats
        executor, ledger, dispatcher = member.executor, member.ledger, member.dispatcher
        worker_settings, worker_id, find_type = settings.worker, member.worker_id, member.app.find
        running = RunningTasks(executor.cancel)
        leases = LeaseBook(expired=events.lease_expired, cancel=running.cancel)
        heartbeat = Heartbeat(
            JobStore.open(settings, worker_id, role="worker-heartbeat"),
            member.health,
            interval=worker_settings.heartbeat_interval_seconds,
            lease_seconds=worker_settings.lease_seconds,
            held=leases.held_ids,
            usage=lambda: (min(executor.busy, member.slots), member.slots),
            on_cancel=lambda job_id: running.cancel(job_id, "operator"),
            on_lost=leases.lost,
        )
        completer = Completer(
            settings=settings,
            topics=member.topics.by_queue,
            worker_id=worker_id,
            publish=member.publisher.publish,
            results=ledger.results,
            events=events,
            release_holds=leases.release,
            mark_done=source.done_items,
            completing=leases.completing,
            stats=stats,
        )
        ahead_limit = worker_settings.claim_ahead_limit
        slots = SlotBook(
            member.slots,
            ClaimAhead(
                default_claim_ahead_limit(member.slots) if ahead_limit is None else ahead_limit,
                time.monotonic(),
            ),
            find_type=find_type,
            tenants=dispatcher,
            dependencies_ready=member.guard.ready,
        )
        intake = Intake(
            settings=settings,
            topics=member.topics,
            worker_id=worker_id,
            partitions=source,
            consumer=consumer,
            publisher=member.publisher,
            events=events,
            in_lane=in_lane,
            find_type=find_type,
            admit=dispatcher.push,
        )
        claims = Claims(
            main=ledger.claims,
            lane=ledger.lane_claims,
            settings=worker_settings,
            worker_id=worker_id,
            topics=member.topics.by_queue,
            events=events,
            hold=leases.hold,
            mark_done=source.done_items,
            push=dispatcher.push,
            unclaimed=slots.unclaimed,
            publish=intake.publish_and_mark,
            quotas=limits.book,
            shares=limits.shares,
            throttles=throttles,
            more_waiting=more_waiting,
        )
        starter = Starter(
            settings=worker_settings,
            slots=slots,
            executor=executor,
            running=running,
            owns=source.owns,
            find_type=find_type,
            guard=member.guard,
            leases=heartbeat.calls,
            complete=completer.add,
            release=completer.release,
            events=events,
            retry_policy=member.retry_policy,
            stats=stats,
            stopping=member.stop.is_set,
        )
        dispatch = Dispatch(
            dispatcher=dispatcher,
            slots=slots,
            claims=claims,
            busy=lambda: executor.busy,
            queued_ahead=starter.queued_ahead,
            may_claim=member.may_claim,
            start_ready=starter.start_ready,
            stats=stats,
        )
        finisher = Finisher(
            inbox=member.inbox,
            running=running,
            slots=slots,
            executor=executor,
            guard=member.guard,
            events=events,
            complete=completer.add,
            release_leases=leases.release,
            mark_done=source.done_items,
            count_crashes=ledger.claims.submit,
            start_ready=starter.start_ready,
            run_again=starter.run_again,
            retry_policy=member.retry_policy,
            crash_budget=worker_settings.crash_budget,
        )
        return cls(
            running,
            leases,
            heartbeat,
            completer,
            slots,
            intake,
            claims,
            starter,
            dispatch,
            finisher,
        )

    def settle_round(self, member: Member, apply_answers: Callable[[], None]) -> None:
        """The loop's steps after reading: answers applied, crashes handled, ended attempts
        collected, results flushed, and free slots claimed again."""
        member.publisher.serve()  # copies Kafka now holds: their sources are done
        apply_answers()
        self.finisher.handle_crashes()
        member.executor.expire()
        self.finisher.collect()
        self.completer.flush()
        self.dispatch.round()

    def read_timeout(self, member: Member, open_records: int = 0) -> float:
        """Never wait in Kafka while finished work waits (that wait would bound throughput:
        slots / loop time); with work in flight (running, to be chosen, ``open_records``),
        wait on the inbox, which its answer wakes."""
        ledger, publisher = member.ledger, member.publisher
        if member.inbox.has_finished or self.completer.unpublished or ledger.has_answers:
            return 0.0
        waiting = member.executor.busy or len(member.dispatcher) or open_records
        if waiting or ledger.pending or publisher.sending:
            return IN_FLIGHT_WAIT_SECONDS
        return IDLE_WAIT_SECONDS

    def apply_answers(self, ledger: Ledger, completed: Callable[[Complete], None]) -> None:
        """Hand what the ledger's lanes answered to the part that asked; ``completed`` is
        told of each written result after the completer."""
        for operation in ledger.drain():
            if isinstance(operation, Claim):
                self.dispatch.claimed(operation)
            elif isinstance(operation, Complete):
                # Each job leaves the completing set with its lease, in one step under the
                # lease book's lock; one refused and written again stays in it.
                self.completer.applied(operation)
                completed(operation)
            elif isinstance(operation, SettleWaiting):
                self.claims.settled(operation)
            elif isinstance(operation, CountCrashes):
                self.finisher.crashes_counted(operation)
            elif isinstance(operation, EnterLane) and operation.answer is False:
                log.info("an operator's placement keeps the tenant out of the hot lane")
