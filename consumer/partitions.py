"""The partitions a worker owns: their offsets, read-ahead windows and pauses.

The main-topic partitions a worker owns share a read-ahead budget: their windows
(``read_ahead_per_partition`` each) together. The worker reads no further than the budget
allows (``read_room``: what it has taken and not yet durably done counts against it), so
under a steady load the partitions share it without a pause. Each main-topic partition is
paused only past twice its share (the budget over the busy ones: an idle partition lends
its window to the others, so the one left with the largest backlog at the end of a drain is
not held to one window), and resumed at its share: a partition whose messages crowd out the
others', a flood, never holds more than that. A partition is not paused at its own window:
under a steady load that flaps many times a second, and every pause makes librdkafka drop
the messages it fetched ahead for the partition, to fetch them again on the resume.

A hot-lane partition has a small window of its own: the lane's backlog is shared by every
worker and read as slots free, and a large window only makes the worker read it in bursts
that the other tenants' messages wait behind (the consumer hands out every partition's
messages through one queue). Retry-tier partitions are also paused while their head message
is not due (``waiting``), then resumed; the rest keep flowing. Neither counts against the
budget; each is paused at its window and resumed at half of it.

Jobs a tenant's limit held back (``held_back``) wait in the worker for their turn
(``tenantq.consumer.throttles``), often at the head of their partition, where the commit waits
for them. A window that counted every message from the commit position on would then fill
with the other tenants' finished messages behind them, and stop reading those tenants. So while
a partition holds some back, its window counts its unfinished messages only, less the held-back
ones (up to ``read_ahead_per_partition`` of them), so the other tenants are read on behind
them; the commit may then lag what was read by at most two main-topic windows, what a
restart reads again (each message found done and passed over). A log is read in order: to
reach a tenant's jobs behind those of one held back, the held-back ones must be read and kept;
the bounds keep that memory to a window or two more per partition.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tenantq.closing import finished_within
from tenantq.consumer.offsets import PartitionOffsets

if TYPE_CHECKING:
    from tenantq.consumer.work import WorkItem

log = logging.getLogger("tenantq.worker")

Key = tuple[str, int]


@dataclass
class PartitionState:
    offsets: PartitionOffsets = field(default_factory=PartitionOffsets)
    #: Main-topic partitions: whose unfinished messages the window holds (the hot lane's
    #: evidence): the tenant of each unfinished offset, and how many each tenant has.
    tenant_of: dict[int, str] = field(default_factory=dict)
    tenant_counts: Counter[str] = field(default_factory=Counter)
    #: Read-ahead: messages taken and not yet done at which the partition is paused.
    window: int = 1_000
    paused_full: bool = False
    #: Paused because its head message (a retry) is not due yet.
    waiting: bool = False
    #: Messages taken whose jobs a tenant's limit held back (outside the window, up to a
    #: bound: ``counted``).
    held_back: int = 0
    revoked: bool = False
    #: Which assignment of the partition this is (unique within the worker): an answer about
    #: a message read under an earlier one must not move this one's offsets.
    epoch: int = 0
    #: The last commit position handed out by ``moved_positions``.
    offered: int | None = None
    stored: int | None = None
    committed: int | None = None


class Partitions:
    def __init__(
        self,
        window: int,
        lane_window: int | None = None,
        lane_topics: frozenset[str] = frozenset(),
        main_topics: frozenset[str] = frozenset(),
        *,
        commit_stored_only: bool = False,
    ) -> None:
        self.window = window
        #: ``commit`` commits the stored positions, not the latest: with the standby gate
        #: (``tenantq.consumer.standby_gate``) a position is stored only once the standbys
        #: hold the state behind it.
        self.commit_stored_only = commit_stored_only
        self.lane_window = window if lane_window is None else lane_window
        self.lane_topics = lane_topics
        #: Topics whose partitions share a read-ahead budget (the queues' main topics).
        self.main_topics = main_topics
        self.states: dict[Key, PartitionState] = {}
        #: What the lag gauges and the hot lane read of the partitions' progress.
        self.progress = ProgressView(self.states)
        #: The main-topic partitions assigned, and how many of them (not revoked) are owned
        #: and have messages in flight, as ``apply_flow_control`` last counted.
        self._main_keys: set[Key] = set()
        self._main_owned = 0
        self._main_busy = 0
        self._main_in_flight = 0
        self._paused_all = False
        self._epochs = itertools.count(1)
        #: Paused as a whole while the database is away (``suspend``).
        self._suspended = False
        #: Partitions whose offsets moved since ``store`` last ran, and whose window or wait
        #: changed since ``apply_flow_control`` last ran: the poll loop runs both every round
        #: (up to a thousand a second), and a worker owns every retry tier's partitions too,
        #: most of them idle, so neither looks at a partition that nothing happened to.
        self._to_store: set[Key] = set()
        self._to_control: set[Key] = set()

    def assigned(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Start the bookkeeping of newly assigned partitions; returns those that got a fresh
        state (not the ones named again while still ours)."""
        fresh = []
        for p in partitions:
            key = (p.topic, p.partition)
            if self.owns(*key):
                # Named again while still ours: its offsets keep their bookkeeping (and its
                # pauses). A fresh state would forget the unfinished messages and commit
                # past them.
                log.warning("%s[%d] assigned while already owned; its offsets are kept", *key)
                continue
            fresh.append(p)
            # A fresh state on every assignment: positions come from the committed offsets,
            # never from a stale paused position (librdkafka #4686).
            window = self.lane_window if p.topic in self.lane_topics else self.window
            self.states[key] = PartitionState(window=window, epoch=next(self._epochs))
            self._to_control.add(key)
            if p.topic in self.main_topics:
                self._main_keys.add(key)
        return fresh

    def owns(self, topic: str, partition: int) -> bool:
        state = self.states.get((topic, partition))
        return state is not None and not state.revoked

    def take(self, topic: str, partition: int, offset: int, timestamp_ms: int | None = None) -> int:
        """Track a message read; returns the epoch of the partition's assignment to give back
        with ``done``, or 0 when the partition is not ours (the message is to be ignored)."""
        key = (topic, partition)
        state = self.states.get(key)
        if state is None or state.revoked:
            return 0
        state.offsets.take(offset, timestamp_ms)
        self._to_store.add(key)
        self._to_control.add(key)
        return state.epoch

    def current(self, topic: str, partition: int, epoch: int) -> bool:
        """The partition is ours, under the assignment ``epoch``."""
        state = self.states.get((topic, partition))
        return state is not None and not state.revoked and state.epoch == epoch

    def over_window(self, topic: str, partition: int, held: int) -> bool:
        """Routing one more message would put the partition past its read-ahead window;
        ``held``: messages taken but held back (not in the window)."""
        state = self.states.get((topic, partition))
        return state is not None and counted(state, self.window) - held > state.window

    def hold_back(self, items: Iterable[WorkItem], count: int) -> None:
        """``count`` = 1: the items' jobs were held back by a tenant's limit (they leave the
        windows); -1: they are asked for again, or given up (they count again)."""
        states = self.states
        for item in items:
            key = (item.topic, item.partition)
            state = states.get(key)
            if state is not None and state.epoch == item.record.epoch:
                state.held_back = max(0, state.held_back + count)
                self._to_control.add(key)

    def done(self, topic: str, partition: int, offset: int, epoch: int) -> None:
        """The message at ``offset``, read under assignment ``epoch``, is durably handled.
        Ignored when the partition was given up since (even if it came back): the message
        is read again from the committed offset, and the new assignment tracks that copy."""
        key = (topic, partition)
        state = self.states.get(key)
        if state is not None and state.epoch == epoch:
            state.offsets.done(offset)
            self._to_store.add(key)
            self._to_control.add(key)
            tenant = state.tenant_of.pop(offset, None)
            if tenant is not None:
                state.tenant_counts[tenant] -= 1
                if state.tenant_counts[tenant] <= 0:
                    del state.tenant_counts[tenant]

    def done_items(self, items: Iterable[WorkItem]) -> None:
        """``done`` of each item's message, under the assignment it was read in (a batch of
        results, or what one claim sorted out)."""
        done = self.done
        for item in items:
            done(item.topic, item.partition, item.offset, item.record.epoch)

    def note_tenant(self, topic: str, partition: int, offset: int, tenant: str) -> None:
        """The unfinished message at ``offset`` is ``tenant``'s (main topics only)."""
        state = self.states.get((topic, partition))
        if state is not None and offset not in state.tenant_of:
            state.tenant_of[offset] = tenant
            state.tenant_counts[tenant] += 1

    def pause_waiting(self, consumer: Consumer, topic: str, partition: int) -> None:
        """Pause the partition: its head message is not due yet. Flow control leaves it
        paused until ``resume_due``."""
        state = self.states.get((topic, partition))
        if state is None or state.revoked:
            return
        first = not state.waiting
        state.waiting = True
        if first and not state.paused_full:
            try:
                consumer.pause([TopicPartition(topic, partition)])
            except KafkaException as error:
                log.warning("pause of %s[%d] failed: %s", topic, partition, error)

    def resume_due(self, consumer: Consumer, topic: str, partition: int) -> None:
        """The partition's waiting messages are routed: let it flow again."""
        state = self.states.get((topic, partition))
        if state is None or not state.waiting:
            return
        state.waiting = False
        # Flow control looks at it again: its window may have filled while it waited.
        self._to_control.add((topic, partition))
        if not state.paused_full and not self._paused_all and not self._suspended:
            try:
                consumer.resume([TopicPartition(topic, partition)])
            except KafkaException as error:
                log.warning("resume of %s[%d] failed: %s", topic, partition, error)

    def main_window(self) -> int:
        """The share of the budget of each busy main-topic partition: its own window, or
        more while some of them have nothing in flight."""
        if self._main_busy <= 0 or self._main_busy >= self._main_owned:
            return self.window
        return self.window * self._main_owned // self._main_busy

    def read_room(self) -> int | None:
        """How many messages the worker may read now: what is left of the main-topic
        partitions' budget (as ``apply_flow_control`` last counted). None while it owns no
        main-topic partition (nothing to bound: the paused windows do)."""
        if not self._main_owned:
            return None
        return max(0, self.window * self._main_owned - self._main_in_flight)

    def _count_main(self) -> bool:
        """Count the main-topic partitions owned and busy, and their messages in flight; True
        when the busy ones' shares changed."""
        owned = busy = in_flight = 0
        states = self.states
        for key in self._main_keys:
            state = states[key]
            if not state.revoked:
                owned += 1
                taken = counted(state, self.window)
                if taken:
                    busy += 1
                    in_flight += taken
        changed = (owned, busy) != (self._main_owned, self._main_busy)
        self._main_owned, self._main_busy, self._main_in_flight = owned, busy, in_flight
        return changed

    def apply_flow_control(self, consumer: Consumer) -> None:
        if self._paused_all or self._suspended:
            return
        pause: list[TopicPartition] = []
        resume: list[TopicPartition] = []
        if self.main_topics and self._to_control and self._count_main():
            # The shares moved: every main-topic partition is looked at again.
            self._to_control.update(self._main_keys)
        changed, self._to_control = self._to_control, set()
        # A main-topic partition is paused past twice its share and resumed at its share;
        # any other at its window and at half of it.
        main_share = self.main_window()
        main_topics = self.main_topics
        for key in changed:
            state = self.states.get(key)
            if state is None or state.revoked:
                continue
            topic, partition = key
            in_flight = counted(state, self.window)
            if state.waiting:
                continue  # waiting for a retry to come due: the intake resumes it
            window = 2 * main_share if topic in main_topics else state.window
            if not state.paused_full and in_flight >= window:
                state.paused_full = True
                pause.append(TopicPartition(topic, partition))
            elif state.paused_full and in_flight <= window // 2:
                state.paused_full = False
                resume.append(TopicPartition(topic, partition))
        try:
            if pause:
                consumer.pause(pause)
            if resume:
                consumer.resume(resume)
        except KafkaException as error:
            log.debug("pause/resume failed: %s", error)

    def suspend(self, consumer: Consumer) -> None:
        """Pause every owned partition while the database is away: nothing read now could be
        claimed, and the read-ahead windows are full enough. The consumer keeps polling, so
        the group keeps the member."""
        self._suspended = True
        _pause_assignment(consumer, "suspend")

    def unsuspend(self, consumer: Consumer) -> None:
        """Resume what ``suspend`` paused, except partitions flow control or a waiting retry
        keeps paused."""
        self._suspended = False
        if self._paused_all:
            return
        resume = [
            TopicPartition(topic, partition)
            for (topic, partition), state in self.states.items()
            if not (state.revoked or state.paused_full or state.waiting)
        ]
        try:
            if resume:
                consumer.resume(resume)
        except KafkaException as error:
            log.debug("unsuspend failed: %s", error)

    def pause_all(self, consumer: Consumer) -> None:
        self._paused_all = True
        _pause_assignment(consumer, "pause_all")

    def store(self, consumer: Consumer) -> None:
        """Store the commit position of every partition that moved (committed by the client's
        auto-commit, or by ``commit`` on revoke and shutdown)."""
        self.store_positions(consumer, self.moved_positions())

    def moved_positions(self) -> dict[Key, tuple[int, int]]:
        """The commit position of every owned partition that moved since the last call, with
        the epoch of its assignment: what ``store_positions`` takes, now or later."""
        positions: dict[Key, tuple[int, int]] = {}
        moved, self._to_store = self._to_store, set()
        for key in moved:
            state = self.states.get(key)
            if state is None or state.revoked:
                continue
            position = state.offsets.commit_position
            if position is None or position == state.offered:
                continue
            state.offered = position
            positions[key] = (state.epoch, position)
        return positions

    def store_positions(self, consumer: Consumer, positions: dict[Key, tuple[int, int]]) -> None:
        """Store ``positions`` (``moved_positions``) of the partitions still owned under the
        assignment each was taken in."""
        to_store = []
        for key, (epoch, position) in positions.items():
            state = self.states.get(key)
            if state is None or state.revoked or state.epoch != epoch or position == state.stored:
                continue
            state.stored = position
            to_store.append(TopicPartition(key[0], key[1], position))
        if not to_store:
            return
        try:
            consumer.store_offsets(offsets=to_store)
        except KafkaException as error:
            # _STATE: a partition is no longer ours (lost in a rebalance): not a crash.
            log.debug("store_offsets: %s", error)

    def commit(self, consumer: Consumer, keys: set[Key] | None, *, timeout: float | None) -> None:
        """Synchronously commit the stored positions of ``keys`` (all when None), waiting at
        most ``timeout`` seconds (None: until the coordinator answers).

        A synchronous commit waits for the group coordinator without end: with the broker
        gone, a worker told to stop never got past its final commit. At shutdown, past
        ``timeout`` it goes on without it (the commit carries on in its thread, ahead of the
        consumer's leave in librdkafka's queue, while the process lives). That is safe: the
        partitions' next owner reads from the last commit, and the ledger marks what already
        finished done without running it again. A revoke waits without a bound: its commit
        must land before the partitions have a new owner."""
        offsets = []
        for key, state in self.states.items():
            if keys is not None and key not in keys:
                continue
            position = state.stored if self.commit_stored_only else state.offsets.commit_position
            if position is not None and position != state.committed:
                offsets.append(TopicPartition(key[0], key[1], position))
                state.committed = position
        if not offsets:
            return
        if timeout is None:
            _commit(consumer, offsets)
            return
        if not finished_within(lambda: _commit(consumer, offsets), timeout, "tenantq-commit"):
            log.warning(
                "offsets of %d partition(s) not committed within %.0fs (is Kafka reachable?); "
                "their next owner reads from the last commit",
                len(offsets),
                timeout,
            )

    def mark_revoked(self, keys: set[Key]) -> None:
        for key in keys:
            state = self.states.get(key)
            if state is not None:
                state.revoked = True

    def forget(self, keys: set[Key]) -> None:
        for key in keys:
            self.states.pop(key, None)
            self._main_keys.discard(key)


def _commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as error:
        # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: ownership moved on.
        log.info("commit refused (%s); the next owner re-reads from the last commit", error)


def counted(state: PartitionState, window: int) -> int:
    """The partition's messages in flight that count against its window: those from its
    commit position on; while a tenant's limit holds some back, the unfinished ones only,
    less the held-back ones (up to one main-topic ``window`` of them), and never less than
    what leaves the commit more than two main-topic windows behind."""
    offsets = state.offsets
    if not state.held_back:
        return offsets.in_flight
    return max(
        offsets.unfinished - min(state.held_back, window),
        offsets.in_flight - 2 * window,
    )


def _pause_assignment(consumer: Consumer, why: str) -> None:
    try:
        assignment = consumer.assignment()
        if assignment:
            consumer.pause(assignment)
    except KafkaException as error:
        log.debug("%s failed: %s", why, error)


class ProgressView:
    """How far the owned partitions are (read-only; the poll thread)."""

    def __init__(self, states: dict[Key, PartitionState]) -> None:
        self._states = states

    def lag(self, consumer: Consumer) -> dict[Key, int]:
        """Messages behind the high watermark per owned partition (the client's cached
        watermarks: no broker round trip)."""
        lags = {}
        for (topic, partition), state in self._states.items():
            if state.revoked:
                continue
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except KafkaException:
                continue
            position = state.offsets.commit_position
            if high is not None and high >= 0 and position is not None:
                lags[(topic, partition)] = max(0, high - position)
        return lags

    def oldest_unfinished_ms(self) -> dict[str, int]:
        """Per topic, the Kafka timestamp of the oldest message not yet durably done."""
        oldest: dict[str, int] = {}
        for (topic, _), state in self._states.items():
            stamp = state.offsets.oldest_timestamp_ms
            if stamp is not None and (topic not in oldest or stamp < oldest[topic]):
                oldest[topic] = stamp
        return oldest
