"""Giving work back: partitions revoked or lost in a rebalance, and the drain at shutdown.

On revoke: stop dispatching those partitions, give running jobs a grace period, commit what
is done, release the leases of what is not (and signal its cancellation). On lost: the
partitions may already be another member's, so nothing is committed; the leases are released.
At shutdown (the deploy contract): no new leases, running jobs finish within the drain window
(their leases kept alive), the rest are released, offsets committed, then the group is left.
After a failover that lost the end of the database's history: every partition is given up as
lost and read again from its last safe offset (``rewind``).

The consumer's callbacks and the drain run on the poll thread (librdkafka serves rebalance
callbacks inside ``poll``/``consume``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from tenantq.closing import finished_within
from tenantq.consumer.completer import Completer
from tenantq.consumer.draining import finish_running
from tenantq.consumer.executor import Executor
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.partitions import Key, Partitions
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Publisher
from tenantq.settings import WorkerSettings

log = logging.getLogger("tenantq.worker")

#: How long a rewind after a failover tries to give back the worker's leases, and to learn
#: committed offsets it does not know.
REWIND_RELEASE_SECONDS = 10.0
#: How long a rewind waits for the ledger's lanes to write what they were given (they may be
#: backing off from the failover: up to 5 s between tries).
REWIND_IDLE_SECONDS = 60.0

#: Forget the work of the partitions ``keys`` (all when None) that matches, not yet started:
#: held back, parked, waiting for dispatch, or claimed ahead (their leases given back, with
#: the reason).
ForgetUnstarted = Callable[[Callable[[WorkItem], bool], set[Key] | None, str], None]


@dataclass(eq=False, kw_only=True)
class Handover:
    """Rebalance callbacks and the shutdown drain (poll thread only)."""

    settings: WorkerSettings
    worker_id: str
    consumer: Consumer
    partitions: Partitions
    events: WorkerEvents
    executor: Executor
    finisher: Finisher
    completer: Completer
    publisher: Publisher
    forget_unstarted: ForgetUnstarted
    #: Apply what the ledger's lanes answered.
    apply_answers: Callable[[], None]
    #: Wait, at most this long, until the ledger's lanes have done what they were given.
    wait_idle: Callable[[float], bool]
    #: Items handed to the claims lanes, not answered yet.
    claiming: Callable[[], int]
    #: The database was up when the poll loop last looked (its partitions flow).
    database_up: Callable[[], bool]
    #: Store the commit positions that may be stored now, waiting at most this long for
    #: the standbys to hold the state behind the rest (``StandbyGate.settle``).
    store_offsets: Callable[[float], object]

    # -- rebalance -----------------------------------------------------------------------------

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """``on_assign``: never raises into the client."""
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
                if fresh and self.database_up():
                    consumer.resume(fresh)
                elif fresh:
                    consumer.pause(fresh)
        except Exception:  # callbacks never raise into the client
            log.exception("on_assign failed")

    def revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """``on_revoke``: never raises into the client."""
        try:
            self._give_up(partitions, lost=False)
        except Exception:
            log.exception("on_revoke failed")

    def lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """``on_lost``: never raises into the client."""
        try:
            self._give_up(partitions, lost=True)
        except Exception:
            log.exception("on_lost failed")

    def _give_up(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        if not keys:
            return
        log.info(
            "%s %s", "lost" if lost else "revoked", sorted(keys), extra={"worker": self.worker_id}
        )

        def ours(item: WorkItem) -> bool:
            return (item.topic, item.partition) in keys

        reason = "partition revoked" if not lost else "partition lost"
        executor, completer = self.executor, self.completer
        self.partitions.mark_revoked(keys)
        for topic, partition in keys:
            self.events.partition_revoked(topic, partition)
        self.forget_unstarted(ours, keys, reason)
        grace = self.settings.revoke_grace_seconds
        # Attempts that ended already have results, written under their leases (fenced by
        # them, whoever owns the partition now): given back instead, they ran twice.
        self.finisher.collect()
        if not lost:
            # Results already decided are written; their offsets can be committed.
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(ours(t.item) for t in executor.running()):
                time.sleep(0.02)
                executor.expire()
                self.finisher.collect()
                completer.flush(now=True)
                self.apply_answers()
        unfinished = [t for t in executor.running() if ours(t.item)]
        for task in unfinished:
            executor.cancel(task, "revoked")
        completer.release(self.finisher.abandon(unfinished), reason)
        if not lost:
            completer.flush(now=True)
            self._settle_in_time(grace)
            self.publisher.settle(grace)
            self.store_offsets(grace)
            # Unbounded, inside the callback: the commit must land before the partitions have
            # a new owner, or it could overwrite the new owner's commit with positions past
            # jobs that owner has given back since (then nobody reads them again).
            self.partitions.commit(self.consumer, keys, timeout=None)
        self.partitions.forget(keys)

    # -- failover ------------------------------------------------------------------------------

    def rewind(self, release_own_leases: Callable[[], bool]) -> None:
        """The database failed over, and the new primary may lack the end of the old one's
        history: claims, results and rows this worker saw written. Every partition is given
        up as lost (running jobs cancelled and given back, nothing committed), the leases the
        worker still holds on the new primary are given back (``release_own_leases``: they
        are left from that history, and the claim would take one for a job running here),
        and each partition is read again from its last stored position, behind what the
        standbys had (``tenantq.consumer.standby_gate``): what the new primary lacks runs
        again, what it has is found done."""
        partitions = self.partitions
        keys = {key for key, state in partitions.states.items() if not state.revoked}
        stored = {key: partitions.states[key].stored for key in keys}
        owned = [TopicPartition(topic, partition) for topic, partition in sorted(keys)]
        log.warning(
            "the database failed over: reading %d partitions again from their last offsets "
            "the standbys had",
            len(owned),
        )
        self._give_up(owned, lost=True)
        self._write_everything_given()
        deadline = time.monotonic() + REWIND_RELEASE_SECONDS
        while not release_own_leases() and time.monotonic() < deadline:
            time.sleep(0.2)
        fresh = partitions.assigned(owned)
        if not fresh:
            return
        unknown = [tp for tp in fresh if stored.get((tp.topic, tp.partition)) is None]
        committed = {
            (tp.topic, tp.partition): tp.offset for tp in self._committed(unknown) if tp.offset >= 0
        }
        for tp in fresh:
            key = (tp.topic, tp.partition)
            offset = stored.get(key)
            if offset is None:
                offset = committed.get(key, OFFSET_BEGINNING)
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as error:
                log.warning(
                    "seek of %s[%d] to %d failed: %s", tp.topic, tp.partition, offset, error
                )
        # As on an assignment: the client's pauses outlive our state of the partitions.
        try:
            if self.database_up():
                self.consumer.resume(fresh)
            else:
                self.consumer.pause(fresh)
        except KafkaException as error:
            log.debug("resume after the rewind failed: %s", error)

    def _write_everything_given(self) -> None:
        """Until the ledger's lanes have written everything they were given, and what their
        answers led to (a claim answered now gives its lease back: its partition is gone).
        A release written after the partitions are read again could match a new lease of
        the same job (same attempt, same owner) and take it from a running job; so it waits
        for lanes still backing off from the failover, up to ``REWIND_IDLE_SECONDS``."""
        # Results waiting for their next step (a retry, a dead letter) to be acknowledged
        # by Kafka go to the lanes once it is.
        self.publisher.settle(self.settings.revoke_grace_seconds)
        deadline = time.monotonic() + REWIND_IDLE_SECONDS
        while True:
            self.completer.flush(now=True)
            self.wait_idle(max(0.0, deadline - time.monotonic()))
            self.apply_answers()
            self.completer.flush(now=True)
            if self.wait_idle(0.0):
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "the database's write lanes still busy %.0fs after the failover; reading "
                    "the partitions again all the same",
                    REWIND_IDLE_SECONDS,
                )
                return

    def _committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        if not partitions:
            return []
        try:
            return list(self.consumer.committed(partitions, timeout=REWIND_RELEASE_SECONDS))
        except KafkaException as error:
            log.warning("committed offsets unknown (%s): those partitions are read again", error)
            return []

    # -- shutdown ------------------------------------------------------------------------------

    def drain(self, deadline: Callable[[], float]) -> None:
        """Run the deploy contract until ``deadline()`` (``time.monotonic``; asked each turn:
        a second stop signal moves it to now)."""
        executor, finisher, completer = self.executor, self.finisher, self.completer
        deadline()  # the drain window starts now
        log.info("draining %d running jobs", executor.busy)
        self.partitions.pause_all(self.consumer)
        self.forget_unstarted(lambda item: True, None, "worker shut down before the job started")
        finish_running(
            executor=executor,
            finisher=finisher,
            completer=completer,
            deadline=deadline,
            claiming=self.claiming,
            turn=self._drain_turn,
            flush_events=self.events.flush,
        )
        bound = self.settings.final_write_seconds
        self._settle_in_time(bound)
        self.publisher.settle(bound)
        self.store_offsets(bound)
        self.partitions.commit(self.consumer, None, timeout=bound)

    def _drain_turn(self) -> None:
        self.consumer.consume(num_messages=1, timeout=0.05)  # stay in the group
        self.apply_answers()

    def leave_group(self) -> None:
        """Leave the group. ``close()`` can hang in a rebalance (librdkafka #4527), so it runs
        with a bound (``leave_group_seconds``); the process exits regardless, and the group
        notices via the session."""
        timeout = self.settings.leave_group_seconds
        if not finished_within(self.consumer.close, timeout, "tenantq-consumer-close"):
            log.warning("consumer close did not finish within %.0fs; leaving anyway", timeout)

    def _settle_in_time(self, timeout: float) -> None:
        """Let the lanes finish what they were given (bounded: the database may be away) and
        apply their answers."""
        self.wait_idle(max(0.0, timeout))
        self.apply_answers()
