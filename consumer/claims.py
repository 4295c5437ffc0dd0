"""From chosen work to leases: claim in one statement, and sort out what the claim did not take.

| job row at claim time                          | what happens                                  |
| ---------------------------------------------- | --------------------------------------------- |
| leased to us                                   | held, waits for a slot (``SlotBook.ready``)   |
| held back by its tenant's cap or rate          | parked per tenant (``Throttles``)             |
| (not touched); or past its share, not claimed  |                                               |
| job already terminal / ours already            | offset done                                   |
| cancel requested before it ran                 | canceled, offset done                         |
| attempts used up at lease time                 | dead with the reason, DLQ, offset done        |
| same job id, different payload                 | DLQ as a conflict; the original is kept       |
| job id of another deployment on the database   | DLQ as a conflict; its row is not touched     |
| row the database refused (NUL, constraint)     | DLQ with that row's own reason                |
| leased by another live worker                  | parked, claimed again when the lease ends     |
| row locked by another transaction (an operator)| parked, claimed again a second later          |
| waiting, not due, main topic                   | offset done: its retry message owns the wait  |
| waiting and due (or a retry message) unclaimed | claimed again shortly (clock or timing race)  |

Everything here runs on the poll thread.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from tenantq.consumer.intake import Polled
from tenantq.consumer.ledger import Claim, ClaimSettings, OperationLane, Settle, SettleWaiting
from tenantq.consumer.outcomes import Verdict, crashed_too_often
from tenantq.consumer.throttles import Throttles
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Outgoing
from tenantq.quotas.book import QuotaBook
from tenantq.quotas.shares import RETRY_SECONDS as SHARE_RETRY_SECONDS
from tenantq.quotas.shares import ShareBook
from tenantq.settings import WorkerSettings
from tenantq.states import JobState
from tenantq.store.job_store import JobStatus
from tenantq.store.quota_claim import ClaimQuotas, Throttle
from tenantq.tenant_limits import ThrottleReason
from tenantq.topics import QueueTopics

log = logging.getLogger("tenantq.worker")

#: How often a parked job (leased by another live worker) is tried again at most.
PARK_RECHECK_SECONDS = 1.0
#: When a job whose row another transaction holds is tried again.
LOCKED_RECHECK_SECONDS = 1.0
#: Claims per lane in flight beyond one per connection of the lane (each running): one more,
#: gathering, which a connection starts the moment it is free. Freed slots wait for the next
#: statement rather than each making its own.
CLAIMS_GATHERING = 1
#: A job past its tenant's share waits this long before it is asked for again.
SHARE_THROTTLE = Throttle(ThrottleReason.WEIGHT, SHARE_RETRY_SECONDS)


class Claims:
    """Hands chosen items to the claims lanes and sorts out their answers; keeps the parked
    items (poll thread only)."""

    def __init__(
        self,
        *,
        main: OperationLane,
        lane: OperationLane,
        settings: WorkerSettings,
        worker_id: str,
        topics: dict[str, QueueTopics],
        events: WorkerEvents,
        hold: Callable[[list[WorkItem]], None],
        mark_done: Callable[[list[WorkItem]], None],
        push: Callable[[WorkItem], None],
        unclaimed: Callable[[WorkItem], None],
        publish: Callable[[list[tuple[Outgoing, Polled]]], None],
        quotas: QuotaBook,
        shares: ShareBook,
        throttles: Throttles,
        more_waiting: Callable[[str, str], bool],
    ) -> None:
        #: The claims lane of main-topic and retry jobs, and the hot lane's own (see ``ledger``).
        self._main = main
        self._lane = lane
        self.settings = ClaimSettings(
            settings.lease_seconds, settings.stale_owner_seconds, settings.crash_budget
        )
        self._worker_id = worker_id
        self._topics = topics
        self._events = events
        #: The leases now ours (the heartbeat renews them).
        self._hold = hold
        #: Their messages are durably handled (offsets may move past them).
        self._mark_done = mark_done
        #: Back to fair dispatch (the dispatcher's ``push``).
        self._push = push
        #: A chosen item gives its slot back unclaimed.
        self._unclaimed = unclaimed
        #: Publish to Kafka and mark each source done once Kafka holds the message.
        self._publish = publish
        #: Which claims apply tenants' caps and rates, and which queues are shared by weight.
        self._quotas = quotas
        #: Each tenant's share of a fair queue, fleet-wide.
        self._shares = shares
        #: Where the jobs a limit held back wait.
        self._throttles = throttles
        #: More jobs of (queue, tenant) wait here than a claim asks for (a share's backlog).
        self._more_waiting = more_waiting
        #: Items to claim again later (``retry_claim_at``).
        self.parked: list[WorkItem] = []

    def full(self, lane: bool) -> bool:
        """The claims lane of the hot lane (``lane``), or the other, takes no more now."""
        claims = self._lane if lane else self._main
        return claims.pending >= claims.connections + CLAIMS_GATHERING

    def claim(self, items: list[WorkItem]) -> None:
        """Hand the chosen items to the claims lane, one statement for all; ``claimed`` sorts
        out the answer. Returns at once. In a queue shared out by weight, jobs past their
        tenant's share now wait in ``Throttles`` instead."""
        if not items:
            return
        unique: dict[uuid.UUID, WorkItem] = {}
        for item in items:
            if item.job_id in unique:
                # Two messages of one job in one round (a producer retry, or a main-topic
                # message read again next to the job's retry message): each is judged on its
                # own, in the next round, once this round has decided the first. Marking the
                # second done here would lose the job when the first is the one set aside.
                self._unclaimed(item)
                self._push(item)
            else:
                unique[item.job_id] = item
        chosen_all = self._within_shares(list(unique.values()))
        for lane_items, ledger_lane in ((False, self._main), (True, self._lane)):
            chosen = [item for item in chosen_all if item.lane is lane_items]
            if chosen:
                ledger_lane.submit(
                    Claim(
                        [item.claim_request() for item in chosen],
                        context=chosen,
                        settings=self.settings,
                        quotas=self._quotas_of(chosen),
                    )
                )

    def _quotas_of(self, chosen: list[WorkItem]) -> ClaimQuotas | None:
        """The caps and rates a claim of ``chosen`` applies (None: the plain claim)."""
        quotas = self._quotas
        if quotas.unlimited:
            return None
        return quotas.quotas_of({item.tenant_id for item in chosen})

    def _within_shares(self, items: list[WorkItem]) -> list[WorkItem]:
        """The items a claim may take now: in a queue shared out by weight, each tenant's
        first ones within its share (``tenantq.quotas.shares``); the rest wait here for their
        turn, their slots given back."""
        quotas = self._quotas
        if not quotas.any_fair:
            return items
        shares = self._shares
        by_key: dict[tuple[str, str], list[WorkItem]] = {}
        kept: list[WorkItem] = []
        for item in items:
            if quotas.fair(item.queue):
                by_key.setdefault((item.queue, item.tenant_id), []).append(item)
            else:
                kept.append(item)
        held_back: list[tuple[WorkItem, Throttle]] = []
        for (queue, tenant), group in by_key.items():
            room = shares.room(queue, tenant)
            allowed = group if room is None else group[:room]
            excess = group[len(allowed) :]
            kept.extend(allowed)
            shares.started(queue, tenant, len(allowed))
            if excess:
                shares.backlogged(queue, tenant, held=True)
                for item in excess:
                    self._unclaimed(item)
                    held_back.append((item, SHARE_THROTTLE))
            elif self._more_waiting(queue, tenant):
                shares.backlogged(queue, tenant)
        self._throttles.hold(held_back)
        return kept

    def claimed(self, operation: Claim) -> list[WorkItem]:
        """The claims lane answered: returns the items now leased to us. The rest are sorted
        out (done, parked, buried, dead-lettered); rows the database refused go to the DLQ
        with its reason."""
        items: list[WorkItem] = operation.context
        answer = operation.answer
        if answer is None:
            # The lane never ran it (stopping, or a fault it logged): nothing is known of
            # these jobs, so nothing is done. They are claimed again shortly.
            retry_at = time.monotonic() + PARK_RECHECK_SECONDS
            for item in items:
                item.retry_claim_at = retry_at
            self.parked.extend(items)
            return []
        leases = answer.leases
        statuses = answer.statuses
        throttled = answer.throttles
        refused = {request.job_id: reason for request, reason in operation.refused}
        claimed = []
        rest = []
        held_back: list[tuple[WorkItem, Throttle]] = []
        for item in items:
            lease = leases.get(item.job_id)
            if lease is None:
                throttle = throttled.get(item.job_id) if throttled else None
                if throttle is not None:
                    held_back.append((item, throttle))
                elif item.job_id not in refused:
                    rest.append(item)
                continue
            item.lease = lease
            # An adopted lease (our own, from a try whose connection dropped) is no takeover.
            if not lease.inserted and item.tier is None and not (answer and answer.again):
                self._events.lease_takeover(item.queue)
            claimed.append(item)
        self._hold(claimed)
        throttles = self._throttles
        if held_back or len(throttles):
            throttles.hold(held_back)
            again = {id(item) for item, _ in held_back}
            # Held back before, leased or sorted out now: back in their windows.
            throttles.let_go(item for item in items if item.held_back and id(item) not in again)
            # Tenants held back before whose jobs all went through: the next ones follow.
            stopped = {(item.queue, item.tenant_id) for item, _ in held_back}
            throttles.let_through(
                {
                    key
                    for key in ((item.queue, item.tenant_id) for item in claimed)
                    if key not in stopped and throttles.is_held(key)
                }
            )
        # Each refused row goes with its own reason, not the batch's.
        for reason in sorted(set(refused.values())):
            self._dead_letter_items(
                [item for item in items if refused.get(item.job_id) == reason],
                "DatabaseRefused",
                reason,
            )
        if rest:
            self._sort_out(rest, statuses)
        return claimed

    def _sort_out(self, items: list[WorkItem], statuses: dict[uuid.UUID, JobStatus]) -> None:
        crash_budget = self.settings.crash_budget
        now = time.monotonic()
        done: list[WorkItem] = []
        to_cancel: list[WorkItem] = []
        #: (item, error class, why) of each job that goes dead at lease time.
        to_bury: list[tuple[WorkItem, str, str]] = []
        conflicts: list[WorkItem] = []
        foreign: list[WorkItem] = []
        for item in items:
            status = statuses.get(item.job_id)
            if status is not None and status.of_another_deployment:
                foreign.append(item)  # forged or misrouted: not this deployment's job
            elif status is None:
                # Not inserted: its idempotency key belongs to another job. The original
                # stands; this copy is a duplicate by key.
                log.info(
                    "job %s: idempotency key %r already used",
                    item.job_id,
                    item.envelope.idempotency_key,
                )
                done.append(item)
            elif status.state.terminal:
                done.append(item)
            elif status.payload_sha256 not in (None, item.payload_sha256):
                conflicts.append(item)
            elif status.locked:
                # The claim does not wait for a row lock (an operator's transaction): nothing
                # is decided about the job until its row is free.
                item.retry_claim_at = now + LOCKED_RECHECK_SECONDS
                self.parked.append(item)
            elif status.cancel_requested and status.state is not JobState.LEASED:
                to_cancel.append(item)
            elif (status.attempts >= status.max_attempts or status.crashes >= crash_budget) and (
                status.state is not JobState.LEASED or status.lease_left_seconds <= 0
            ):
                to_bury.append((item, *_burial(status, crash_budget)))
            elif (
                status.state is JobState.LEASED
                and status.lease_owner == self._worker_id
                and item.tier is None
            ):
                done.append(item)  # already running here: the lower offset holds the commit
            elif status.state is JobState.LEASED:
                # Leased elsewhere: tried again when the lease may have ended. Leased here, a
                # retry-tier message is the next attempt's wake-up, published before this
                # worker's result of the last attempt was written (a results lane still
                # catching up after an outage): marked done, it would leave the job
                # 'retrying' with nothing to run it. It waits for that result instead.
                item.retry_claim_at = now + min(
                    PARK_RECHECK_SECONDS, max(0.05, status.lease_left_seconds)
                )
                self.parked.append(item)
            elif item.tier is None and not status.due:
                done.append(item)  # waiting for a retry or a due time: its retry-tier message
            else:
                # Leasable, yet the claim missed it: due by the worker's clock before the
                # database's, or due between the claim and this look. Claim it again shortly;
                # marking it done would leave nothing to run it.
                item.retry_claim_at = now + (0.05 if status.due else 0.2)
                self.parked.append(item)
        self._mark_done(done)
        self._dead_letter_items(
            conflicts, "JobConflict", "same job id with a different payload; the original is kept"
        )
        self._dead_letter_items(
            foreign,
            "JobConflict",
            "the job id belongs to another deployment (topic prefix) on this database; "
            "its job is not touched",
        )
        if to_cancel or to_bury:
            settle = Settle(
                [item.job_id for item in to_cancel],
                [item.job_id for item, _, _ in to_bury],
                crash_budget,
            )
            self._main.submit(SettleWaiting([settle], context=(to_cancel, to_bury)))

    def settled(self, operation: SettleWaiting) -> None:
        """Canceled jobs are done; buried ones get their dead letter. A job the settle did
        not change (another worker moved it meanwhile) is done here: it is that worker's now,
        or terminal."""
        to_cancel, to_bury = operation.context
        if operation.answer is None:
            return  # never ran (stopping, or a fault it logged): the offsets stay unfinished
        canceled, buried = operation.answer
        del canceled  # a cancel that found the job moved on is done all the same
        self._mark_done(to_cancel)
        for item, error_class, why in to_bury:
            if item.job_id in buried:
                self._dead_letter_items([item], error_class, why)
            else:
                self._mark_done([item])

    def _dead_letter_items(self, items: list[WorkItem], error_class: str, message: str) -> None:
        verdict = Verdict.dead(error_class, message)
        outgoing = [
            (
                item.dead_letter_record(
                    self._topics[item.queue],
                    verdict,
                    attempts=item.max_attempts,
                    worker=self._worker_id,
                ),
                item.record,
            )
            for item in items
        ]
        self._publish(outgoing)

    # -- parked --------------------------------------------------------------------------------

    def retry_parked(self) -> None:
        """Back to fair dispatch: the parked items whose time to claim again has come."""
        if not self.parked:
            return
        now = time.monotonic()
        due = [item for item in self.parked if item.retry_claim_at <= now]
        if not due:
            return
        self.parked = [item for item in self.parked if item.retry_claim_at > now]
        for item in due:
            self._push(item)

    def drop_parked(self, predicate: Callable[[WorkItem], bool]) -> None:
        """Forget the parked items that match (their partition was given up)."""
        self._throttles.let_go(item for item in self.parked if predicate(item))
        self.parked = [item for item in self.parked if not predicate(item)]


def _burial(status: JobStatus, crash_budget: int) -> tuple[str, str]:
    """Why a job found leasable goes dead at lease time: (error class, message)."""
    if status.attempts >= status.max_attempts:
        return (
            "AttemptsExhausted",
            "max attempts reached at lease time (the handler never finished: crash, kill or hang)",
        )
    return ("PoisonJob", crashed_too_often(status.crashes, crash_budget))
