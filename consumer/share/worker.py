"""The share-group worker: the consumer-group worker's parts over a ``ShareConsumer``.

What the consumer-group worker (``tenantq.consumer.worker``) does with partitions, offsets
and rebalances, this does with acknowledgements; the rest is the same parts, built the same
way:

| part                      | here                                                          |
| ------------------------- | ------------------------------------------------------------- |
| ``ShareReader``           | polls once every record of the last poll is acknowledged      |
| ``ShareRecords``          | the last poll's records until each is acknowledged            |
| ``Intake``                | as the worker's: decode, dead-letter what cannot be read      |
| ``Dispatch``, ``Claims``  | as the worker's: fair choice, one claim per round, parking    |
| ``SlotBook``, ``Starter`` | as the worker's                                               |
| ``Finisher``, ``Completer``, ``LeaseBook``, ``Heartbeat`` | as the worker's                   |

Left out, on purpose (a spike; ``docs/share-groups.md`` says why): the retry tiers (a share
consumer cannot hold a record until it is due: a retry is published to its tier as ever,
and a consumer-group worker of the queue runs it), the hot lane (no partition to move a
tenant out of), the lag metrics (no committed offsets), and rebalance handling (there is
none: the broker hands records, not partitions).
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

from confluent_kafka import ShareConsumer

from tenantq.app import App
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.claims import Claims
from tenantq.consumer.completer import Completer
from tenantq.consumer.database_health import EXIT_DATABASE_GONE, DatabaseHealth
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatch import Dispatch, fair_dispatcher
from tenantq.consumer.executor import executor_for
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.heartbeat import Heartbeat
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.intake import Intake
from tenantq.consumer.leases import LeaseBook
from tenantq.consumer.ledger import Claim, Complete, CountCrashes, Ledger, SettleWaiting
from tenantq.consumer.reader import IN_FLIGHT_WAIT_SECONDS
from tenantq.consumer.registration import Registration
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.share.group import (
    ShareGroupOptions,
    configure_share_group,
    share_consumer_config,
    share_group,
)
from tenantq.consumer.share.reader import ShareReader
from tenantq.consumer.share.records import ShareRecords
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.starts import RunningTasks, Starter
from tenantq.consumer.stopping import StopRequest
from tenantq.consumer.throttles import Throttles
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker import WorkerObservability
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Publisher
from tenantq.quotas.book import QuotaBook
from tenantq.quotas.shares import ShareBook
from tenantq.settings import Settings
from tenantq.states import Outcome
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")

#: The poll's wait in Kafka when nothing is in flight (the client has no wake-up call: a
#: stop waits this long at most).
IDLE_WAIT_SECONDS = 0.1
#: How long the stop waits for the last results and acknowledgements.
FINAL_WRITE_SECONDS = 10.0
#: The exit status of a member whose share consumer failed for good (a broker without
#: share groups, say).
EXIT_SHARE_CONSUMER_FAILED = 4
#: How long ``close`` may take (it has no timeout of its own in the preview client).
CLOSE_SECONDS = 30.0


class ShareWorker:
    """Runs the handlers of ``app`` for the main topics of ``queues`` as one member of their
    share group. With ``app_reference`` handlers run in a handler process, as under
    ``tenantq worker``; without it, in this process's threads."""

    def __init__(
        self,
        app: App,
        queues: list[str] | None = None,
        *,
        settings: Settings | None = None,
        concurrency: int | None = None,
        worker_id: str | None = None,
        retry_policy: RetryPolicy | None = None,
        app_reference: str | None = None,
        group: ShareGroupOptions | None = None,
        install_signal_handlers: bool = True,
    ) -> None:
        # Set here and never changed: read by any thread.
        self.app = app
        self.settings = settings = settings or app.settings
        self.queues = queues or app.queues() or ["default"]
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.slots = concurrency or settings.worker.concurrency
        self.retry_policy = retry_policy or RetryPolicy()
        self.group = group or ShareGroupOptions()
        self.group_id = share_group(settings.topic_prefix, self.queues)
        self._install_signal_handlers = install_signal_handlers
        self._topics = TopicMap.of(settings, self.queues)
        self.exit_code = 0
        #: Counters (poll thread writes; anyone may read).
        self.stats = dict.fromkeys(("succeeded", "stale_refused", "executed", "claimed_ahead"), 0)
        self.observability = WorkerObservability(settings, self.queues)
        self.events: WorkerEvents = self.observability.metrics
        self.guard = DependencyGuard(policies_from(app.dependencies))
        self._stop = stop = StopRequest(settings.worker.drain_seconds)
        self._inbox = inbox = Inbox()
        self._health = health = DatabaseHealth(on_change=self.events.database_up)
        self._ledger = Ledger(
            lambda lane: JobStore.open(settings, self.worker_id, role=f"worker-{lane}"),
            health,
            on_answer=inbox.wake,
        )
        poll_records = self.group.max_poll_records or 2 * self.slots
        self._consumer = ShareConsumer(
            share_consumer_config(settings, self.group_id, self.worker_id, poll_records)
        )
        #: The records of the last poll (the poll thread; the consumer is not thread-safe).
        self.records = ShareRecords(self._consumer.acknowledge_offset, self.group.lock)
        self._publisher = Publisher(settings, f"tenantq-worker-{self.worker_id}")
        self._executor = executor_for(
            app_reference, self.slots, settings, self.worker_id, self.retry_policy, inbox
        )
        self._dispatcher = fair_dispatcher(settings, self.queues, self.slots, strict=False)
        self._registration = Registration(
            settings, self.worker_id, self.queues, self.slots, health, self._outage_too_long, stop
        )
        self._build_parts()

    def _build_parts(self) -> None:
        """The loop's parts, each given the few things it uses (as the worker builds them)."""
        settings, events, stats = self.settings, self.events, self.stats
        executor, ledger, records = self._executor, self._ledger, self.records
        stop, health = self._stop, self._health
        running = RunningTasks(executor.cancel)
        leases = LeaseBook(expired=events.lease_expired, cancel=running.cancel)
        self._heartbeat = Heartbeat(
            JobStore.open(settings, self.worker_id, role="worker-heartbeat"),
            health,
            interval=settings.worker.heartbeat_interval_seconds,
            lease_seconds=settings.worker.lease_seconds,
            held=leases.held_ids,
            usage=lambda: (executor.busy, self.slots),
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
            mark_done=records.done_items,
            completing=leases.completing,
            stats=stats,
        )
        ahead_limit = settings.worker.claim_ahead_limit
        self._slots = slots = SlotBook(
            self.slots,
            ClaimAhead(self.slots if ahead_limit is None else ahead_limit, time.monotonic()),
            find_type=self.app.find,
            tenants=self._dispatcher,
            dependencies_ready=self.guard.ready,
        )
        self._intake = intake = Intake(
            settings=settings,
            topics=self._topics,
            worker_id=self.worker_id,
            partitions=records,
            consumer=self._consumer,
            publisher=self._publisher,
            events=events,
            in_lane=lambda queue, tenant: False,
            find_type=self.app.find,
            admit=self._dispatcher.push,
        )
        worker_settings = settings.worker
        quota_book = QuotaBook(settings.tenant_defaults)
        quota_book.replace([])
        self._claims = claims = Claims(
            main=ledger.claims,
            lane=ledger.lane_claims,
            settings=worker_settings,
            worker_id=self.worker_id,
            topics=self._topics.by_queue,
            events=events,
            hold=leases.hold,
            mark_done=records.done_items,
            push=self._dispatcher.push,
            unclaimed=slots.unclaimed,
            publish=intake.publish_and_mark,
            # The spike leaves tenant limits out: the defaults' book, never synced with the
            # fleet, and nothing held back by partition (records are not read in order).
            quotas=quota_book,
            shares=ShareBook(quota_book.weight),
            throttles=Throttles(
                push=self._dispatcher.push,
                held_back=lambda items, count: None,
                events=events,
                worker_id=self.worker_id,
            ),
            more_waiting=lambda queue, tenant: False,
        )
        self._starter = starter = Starter(
            settings=worker_settings,
            slots=slots,
            executor=executor,
            running=running,
            owns=records.owns,
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
        self._finisher = Finisher(
            inbox=self._inbox,
            running=running,
            slots=slots,
            executor=executor,
            guard=self.guard,
            events=events,
            complete=completer.add,
            release_leases=leases.release,
            mark_done=records.done_items,
            count_crashes=ledger.claims.submit,
            start_ready=starter.start_ready,
            run_again=starter.run_again,
            retry_policy=self.retry_policy,
            crash_budget=worker_settings.crash_budget,
        )
        self._reader = ShareReader(
            self._consumer,
            records,
            may_read=lambda: not stop.is_set() and health.up,
            wait=self._inbox.wait,
            fatal=self._client_failed,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def stop(self, *, immediately: bool = False) -> None:
        """Ask for a graceful stop (thread-safe); ``immediately`` skips the drain window."""
        self._stop.request(immediately=immediately)

    def run(self) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT."""
        if self._install_signal_handlers and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        if not self._registration.enter():
            self._consumer.close()
            return
        self._start()
        try:
            while not self._stop.is_set():
                self._loop_once()
            self._drain()
        finally:
            self._close()

    def _start(self) -> None:
        configure_share_group(self.settings, self.group_id, self.group)
        self.observability.start()
        self._ledger.start()
        self._executor.start()
        self._heartbeat.start()
        self._consumer.subscribe(list(self._topics.queue_of_main))
        log.info(
            "share worker %s started: group=%s queues=%s slots=%d lock=%.0fs",
            self.worker_id,
            self.group_id,
            self.queues,
            self.slots,
            self.group.lock,
        )

    # -- the poll loop -------------------------------------------------------------------------

    def _loop_once(self) -> None:
        self._follow_database()
        self._inbox.clear()
        messages = self._reader.read(self._read_timeout())
        if messages:
            self._intake.take(messages, between=self._dispatch.round)
            self._dispatch.round()
        self._intake.route_due()  # dead letters Kafka did not take yet, sent again
        self._claims.retry_parked()
        self._publisher.serve()
        self._apply_answers()
        self._finisher.handle_crashes()
        self._executor.expire()
        self._finisher.collect()
        self._completer.flush()
        self._dispatch.round()
        self.events.results_waiting(self._ledger.pending + self._completer.waiting)
        self.events.flush()

    def _read_timeout(self) -> float:
        """As the worker's: never wait while finished work waits; with work in flight, wait
        on the inbox, which its answer wakes."""
        if self._inbox.has_finished or self._completer.unpublished or self._ledger.has_answers:
            return 0.0
        waiting = self._executor.busy or len(self._dispatcher) or self.records.open
        if waiting or self._ledger.pending or self._publisher.sending:
            return IN_FLIGHT_WAIT_SECONDS
        return IDLE_WAIT_SECONDS

    def _follow_database(self) -> None:
        if not self._health.up and self._outage_too_long():
            self.exit_code = EXIT_DATABASE_GONE
            self.stop(immediately=True)

    def _client_failed(self, reason: str) -> None:
        """The share consumer can go no further: stop at once, with the reason."""
        log.error(
            "the share consumer failed for good: %s (share groups need Kafka 4.2 or newer, "
            "with the share.version feature finalized)",
            reason,
        )
        self.exit_code = EXIT_SHARE_CONSUMER_FAILED
        self.stop(immediately=True)

    def _outage_too_long(self) -> bool:
        limit = self.settings.worker.database_outage_limit_seconds
        return limit is not None and self._health.down_for() >= limit

    def _apply_answers(self) -> None:
        """Hand what the ledger's lanes answered to the part that asked; a result that gave a
        lease back (or was never written) gives its record back too."""
        for operation in self._ledger.drain():
            if isinstance(operation, Claim):
                self._dispatch.claimed(operation)
            elif isinstance(operation, Complete):
                self._completer.applied(operation)
                completions = operation.context
                self.records.release_items(
                    completion.item
                    for completion in completions
                    if operation.answer is None or completion.verdict.outcome is Outcome.RELEASED
                )
            elif isinstance(operation, SettleWaiting):
                self._claims.settled(operation)
            elif isinstance(operation, CountCrashes):
                self._finisher.crashes_counted(operation)

    # -- stopping ------------------------------------------------------------------------------

    def _drain(self) -> None:
        """The deploy contract, as the worker's drain: no new leases, running jobs finish
        within the drain window, the rest are given back; then every open record goes back
        to the group and the acknowledgements are committed."""
        executor, finisher, completer = self._executor, self._finisher, self._completer
        deadline = self._stop.drain_deadline
        deadline()
        log.info("draining %d running jobs", executor.busy)
        self._forget_unstarted("worker shut down before the job started")
        while (executor.busy or self._slots.claiming) and time.monotonic() < deadline():
            self._inbox.wait(0.05)
            self._inbox.clear()
            self._apply_answers()
            finisher.handle_crashes()
            executor.expire()
            finisher.collect()
            completer.flush(now=True)
            self.events.flush()
        for task in executor.running():
            executor.cancel(task, "shutdown")
        time.sleep(0.2 if executor.busy else 0)
        finisher.collect()
        completer.release(finisher.abandon(executor.running()), "worker shut down")
        for _ in range(3):
            completer.flush(now=True)
            if not completer.waiting:
                break
        self._ledger.wait_idle(FINAL_WRITE_SECONDS)
        self._apply_answers()
        self._publisher.settle(FINAL_WRITE_SECONDS)
        self.records.release_open()
        try:
            self._consumer.commit_sync(FINAL_WRITE_SECONDS)
        except (RuntimeError, Exception) as error:  # the broker may be away: locks run out
            log.warning("acknowledgements not committed at shutdown: %s", error)

    def _forget_unstarted(self, reason: str) -> None:
        """Forget the work not started: never claimed, its record is released at the end of
        the drain; claimed ahead, its lease is given back with ``reason``."""

        def every(item: WorkItem) -> bool:
            return True

        self._claims.drop_parked(every)
        self._intake.drop_waiting(None)
        self._dispatcher.remove(every)
        self._starter.give_back_ready(every, reason)

    def _close(self) -> None:
        steps: list[Callable[[], object]] = [
            self._leave_group,
            self._heartbeat.stop,
            lambda: self._executor.stop(timeout=5.0),
            lambda: self._ledger.stop(timeout=5.0),
            self._registration.leave,
            self._publisher.close,
            self.events.flush,
            self.observability.close,
        ]
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("error while stopping the share worker")
        log.info("share worker %s stopped: records %s", self.worker_id, dict(self.records.counts))

    def _leave_group(self) -> None:
        """``close`` commits what is acknowledged and leaves the group; bounded here, since
        the preview client's close has no timeout of its own."""
        closer = threading.Thread(
            target=self._consumer.close, name="tenantq-share-close", daemon=True
        )
        closer.start()
        closer.join(CLOSE_SECONDS)
        if closer.is_alive():
            log.warning("share consumer close did not finish within %.0fs", CLOSE_SECONDS)
