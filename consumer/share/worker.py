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
from typing import Unpack

from confluent_kafka import ShareConsumer

from tenantq.app import App
from tenantq.closing import finished_within
from tenantq.consumer.database_health import EXIT_DATABASE_GONE
from tenantq.consumer.draining import finish_running
from tenantq.consumer.ledger import Complete
from tenantq.consumer.member import LoopParts, Member, MemberOptions
from tenantq.consumer.registration import Registration
from tenantq.consumer.share.group import (
    ShareGroupOptions,
    configure_share_group,
    share_consumer_config,
    share_group,
)
from tenantq.consumer.share.reader import ShareReader
from tenantq.consumer.share.records import ShareRecords
from tenantq.consumer.work import WorkItem
from tenantq.quotas.limits_in_use import TenantLimits
from tenantq.states import Outcome

log = logging.getLogger("tenantq.worker")

#: The exit status of a member whose share consumer failed for good (a broker without
#: share groups, say).
EXIT_SHARE_CONSUMER_FAILED = 4


class ShareWorker:
    """Runs the handlers of ``app`` for the main topics of ``queues`` as one member of their
    share group. With ``app_reference`` handlers run in a handler process, as under
    ``tenantq worker``; without it, in this process's threads. The other options are
    ``MemberOptions``, as the worker's."""

    def __init__(
        self,
        app: App,
        queues: list[str] | None = None,
        *,
        group: ShareGroupOptions | None = None,
        install_signal_handlers: bool = True,
        **options: Unpack[MemberOptions],
    ) -> None:
        self._member = member = Member(app, queues, **options)
        # Set here and never changed: read by any thread.
        self.app, self.settings, self.queues = app, member.settings, member.queues
        self.worker_id, self.slots = member.worker_id, member.slots
        self.retry_policy = member.retry_policy
        self.stats, self.observability = member.stats, member.observability
        self.events, self.guard = member.events, member.guard
        self.group = group or ShareGroupOptions()
        self.group_id = share_group(self.settings.topic_prefix, self.queues)
        self.exit_code = 0
        self._install_signal_handlers = install_signal_handlers
        poll_records = self.group.max_poll_records or 2 * self.slots
        self._consumer = ShareConsumer(
            share_consumer_config(self.settings, self.group_id, self.worker_id, poll_records)
        )
        #: The records of the last poll (the poll thread; the consumer is not thread-safe).
        self.records = records = ShareRecords(self._consumer.acknowledge_offset, self.group.lock)
        self._registration = Registration(
            self.settings,
            self.worker_id,
            self.queues,
            self.slots,
            member.health,
            self._outage_too_long,
            member.stop,
        )
        # The spike leaves tenant limits out: the defaults' book, never synced with the
        # fleet, and nothing held back by partition (records are not read in order).
        self._parts = LoopParts.build(
            member,
            records,
            consumer=self._consumer,
            in_lane=lambda queue, tenant: False,
            limits=TenantLimits(self.settings, self.queues, following=False),
            throttles=member.throttles(lambda items, count: None),
            more_waiting=lambda queue, tenant: False,
        )
        self._reader = ShareReader(
            self._consumer,
            records,
            may_read=member.may_claim,
            wait=member.inbox.wait,
            fatal=self._client_failed,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def stop(self, *, immediately: bool = False) -> None:
        """Ask for a graceful stop (thread-safe); ``immediately`` skips the drain window."""
        self._member.stop.request(immediately=immediately)

    def run(self) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT."""
        if self._install_signal_handlers:
            self._member.install_stop_signals(self.stop)
        if not self._registration.enter():
            self._consumer.close()
            return
        self._start()
        try:
            while not self._member.stop.is_set():
                self._loop_once()
            self._drain()
        finally:
            self._close()

    def _start(self) -> None:
        configure_share_group(self.settings, self.group_id, self.group)
        self._member.start()
        self._parts.heartbeat.start()
        self._consumer.subscribe(list(self._member.topics.queue_of_main))
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
        member, parts = self._member, self._parts
        self._follow_database()
        member.inbox.clear()
        messages = self._reader.read(parts.read_timeout(member, self.records.open))
        if messages:
            parts.intake.take(messages, between=parts.dispatch.round)
            parts.dispatch.round()
        parts.intake.route_due()  # dead letters Kafka did not take yet, sent again
        parts.claims.retry_parked()
        parts.settle_round(member, self._apply_answers)
        self.events.results_waiting(member.ledger.pending + parts.completer.waiting)
        self.events.flush()

    def _follow_database(self) -> None:
        if not self._member.health.up and self._outage_too_long():
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
        return limit is not None and self._member.health.down_for() >= limit

    def _apply_answers(self) -> None:
        """Hand what the ledger's lanes answered to the part that asked; a result that gave a
        lease back (or was never written) gives its record back too."""
        self._parts.apply_answers(self._member.ledger, self._results_written)

    def _results_written(self, operation: Complete) -> None:
        self.records.release_items(
            completion.item
            for completion in operation.context
            if operation.answer is None or completion.verdict.outcome is Outcome.RELEASED
        )

    # -- stopping ------------------------------------------------------------------------------

    def _drain(self) -> None:
        """The deploy contract, as the worker's drain: no new leases, running jobs finish
        within the drain window, the rest are given back; then every open record goes back
        to the group and the acknowledgements are committed."""
        member, parts = self._member, self._parts
        executor = member.executor
        deadline = member.stop.drain_deadline
        deadline()
        log.info("draining %d running jobs", executor.busy)
        self._forget_unstarted("worker shut down before the job started")
        finish_running(
            executor=executor,
            finisher=parts.finisher,
            completer=parts.completer,
            deadline=deadline,
            claiming=lambda: parts.slots.claiming,
            turn=self._drain_turn,
            flush_events=self.events.flush,
        )
        bound = self.settings.worker.final_write_seconds
        member.ledger.wait_idle(bound)
        self._apply_answers()
        member.publisher.settle(bound)
        self.records.release_open()
        try:
            self._consumer.commit_sync(bound)
        except (RuntimeError, Exception) as error:  # the broker may be away: locks run out
            log.warning("acknowledgements not committed at shutdown: %s", error)

    def _drain_turn(self) -> None:
        self._member.inbox.wait(0.05)
        self._member.inbox.clear()
        self._apply_answers()

    def _forget_unstarted(self, reason: str) -> None:
        """Forget the work not started: never claimed, its record is released at the end of
        the drain; claimed ahead, its lease is given back with ``reason``."""

        def every(item: WorkItem) -> bool:
            return True

        self._parts.claims.drop_parked(every)
        self._parts.intake.drop_waiting(None)
        self._member.dispatcher.remove(every)
        self._parts.starter.give_back_ready(every, reason)

    def _close(self) -> None:
        self._member.close(
            [self._leave_group, self._parts.heartbeat.stop],
            self._registration.leave,
            [],
            "share worker",
        )
        log.info("share worker %s stopped: records %s", self.worker_id, dict(self.records.counts))

    def _leave_group(self) -> None:
        """``close`` commits what is acknowledged and leaves the group; bounded here, since
        the preview client's close has no timeout of its own (``leave_group_seconds``)."""
        timeout = self.settings.worker.leave_group_seconds
        if not finished_within(self._consumer.close, timeout, "tenantq-share-close"):
            log.warning("share consumer close did not finish within %.0fs", timeout)
