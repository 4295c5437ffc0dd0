"""Giving work back: partitions revoked or lost in a rebalance, and the drain at shutdown.

On revoke: stop dispatching those partitions, give running jobs a grace period, commit what
is done, release the leases of what is not (and signal its cancellation). On lost: the
partitions may already be another member's, so nothing is committed; the leases are released.
At shutdown (the deploy contract): no new leases, running jobs finish within the drain window
(their leases kept alive), the rest are released, offsets committed, then the group is left.

The consumer's callbacks and the drain run on the poll thread (librdkafka serves rebalance
callbacks inside ``poll``/``consume``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from tenantq.consumer.completer import Completer
from tenantq.consumer.executor import Executor
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.partitions import Key, Partitions
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.producer.publisher import Publisher
from tenantq.settings import WorkerSettings

log = logging.getLogger("tenantq.worker")

#: How long shutdown waits for the database and Kafka to take the last results.
FINAL_WRITE_SECONDS = 10.0

#: Forget the work of the partitions ``keys`` (all when None) that matches, not yet started:
#: held back, parked, waiting for dispatch, or claimed ahead (their leases given back, with
#: the reason).
ForgetUnstarted = Callable[[Callable[[WorkItem], bool], set[Key] | None, str], None]


class Handover:
    """Rebalance callbacks and the shutdown drain (poll thread only)."""

    def __init__(
        self,
        *,
        settings: WorkerSettings,
        worker_id: str,
        consumer: Consumer,
        partitions: Partitions,
        events: WorkerEvents,
        executor: Executor,
        finisher: Finisher,
        completer: Completer,
        publisher: Publisher,
        forget_unstarted: ForgetUnstarted,
        apply_answers: Callable[[], None],
        wait_idle: Callable[[float], bool],
        claiming: Callable[[], int],
        database_up: Callable[[], bool],
    ) -> None:
        self._settings = settings
        self._worker_id = worker_id
        self._consumer = consumer
        self._partitions = partitions
        self._events = events
        self._executor = executor
        self._finisher = finisher
        self._completer = completer
        self._publisher = publisher
        self._forget_unstarted = forget_unstarted
        #: Apply what the ledger's lanes answered.
        self._apply_answers = apply_answers
        #: Wait, at most this long, until the ledger's lanes have done what they were given.
        self._wait_idle = wait_idle
        #: Items handed to the claims lanes, not answered yet.
        self._claiming = claiming
        #: The database was up when the poll loop last looked (its partitions flow).
        self._database_up = database_up

    # -- rebalance -----------------------------------------------------------------------------

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """``on_assign``: never raises into the client."""
        try:
            fresh = self._partitions.assigned(partitions)
            log.info(
                "assigned %s",
                [(p.topic, p.partition) for p in partitions],
                extra={"worker": self._worker_id},
            )
            if partitions:
                consumer.incremental_assign(partitions)
                # A partition we paused, gave up and got back can come back still paused
                # (the pause outlives the assignment in the client); our state for it starts
                # fresh and unpaused, so the client's must too, or it never flows again.
                # One named again while still ours keeps the pauses it has.
                if fresh and self._database_up():
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
            "%s %s", "lost" if lost else "revoked", sorted(keys), extra={"worker": self._worker_id}
        )

        def ours(item: WorkItem) -> bool:
            return (item.topic, item.partition) in keys

        reason = "partition revoked" if not lost else "partition lost"
        executor, completer = self._executor, self._completer
        self._partitions.mark_revoked(keys)
        for topic, partition in keys:
            self._events.partition_revoked(topic, partition)
        self._forget_unstarted(ours, keys, reason)
        grace = self._settings.revoke_grace_seconds
        if not lost:
            # Results already decided are written; their offsets can be committed.
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(ours(t.item) for t in executor.running()):
                time.sleep(0.02)
                executor.expire()
                self._finisher.collect()
                completer.flush(now=True)
                self._apply_answers()
        unfinished = [t for t in executor.running() if ours(t.item)]
        for task in unfinished:
            executor.cancel(task, "revoked")
        completer.release(self._finisher.abandon(unfinished), reason)
        if not lost:
            completer.flush(now=True)
            self._settle_in_time(grace)
            self._publisher.settle(grace)
            # Unbounded, inside the callback: the commit must land before the partitions have
            # a new owner, or it could overwrite the new owner's commit with positions past
            # jobs that owner has given back since (then nobody reads them again).
            self._partitions.commit(self._consumer, keys, timeout=None)
        self._partitions.forget(keys)

    # -- shutdown ------------------------------------------------------------------------------

    def drain(self, deadline: Callable[[], float]) -> None:
        """Run the deploy contract until ``deadline()`` (``time.monotonic``; asked each turn:
        a second stop signal moves it to now)."""
        executor, finisher, completer = self._executor, self._finisher, self._completer
        deadline()  # the drain window starts now
        log.info("draining %d running jobs", executor.busy)
        self._partitions.pause_all(self._consumer)
        self._forget_unstarted(lambda item: True, None, "worker shut down before the job started")
        while (executor.busy or self._claiming()) and time.monotonic() < deadline():
            self._consumer.consume(num_messages=1, timeout=0.05)  # stay in the group
            self._apply_answers()
            finisher.handle_crashes()
            executor.expire()
            finisher.collect()
            completer.flush(now=True)
            self._events.flush()
        for task in executor.running():
            executor.cancel(task, "shutdown")
        time.sleep(0.2 if executor.busy else 0)
        finisher.collect()
        abandoned = finisher.abandon(executor.running())
        completer.release(abandoned, "worker shut down before the job finished")
        for _ in range(3):
            completer.flush(now=True)
            if not completer.waiting:
                break
        self._settle_in_time(FINAL_WRITE_SECONDS)
        self._publisher.settle(FINAL_WRITE_SECONDS)
        self._partitions.commit(self._consumer, None, timeout=FINAL_WRITE_SECONDS)

    def leave_group(self, timeout: float = 30.0) -> None:
        """Leave the group. ``close()`` can hang in a rebalance (librdkafka #4527), so it runs
        with a bound; the process exits regardless, and the group notices via the session."""
        closer = threading.Thread(
            target=self._consumer.close, name="tenantq-consumer-close", daemon=True
        )
        closer.start()
        closer.join(timeout)
        if closer.is_alive():
            log.warning("consumer close did not finish within %.0fs; leaving anyway", timeout)

    def _settle_in_time(self, timeout: float) -> None:
        """Let the lanes finish what they were given (bounded: the database may be away) and
        apply their answers."""
        self._wait_idle(max(0.0, timeout))
        self._apply_answers()
