"""The records a share consumer acquired in its last poll, until each is acknowledged.

In a share group the broker locks each record it hands out to the member that acquired it,
for the group's lock duration; the member acknowledges it (ACCEPT: done, RELEASE: give it to
the group again, REJECT: never again) or the lock runs out and the broker hands it to
another member. With explicit acknowledgement the client refuses the next poll while any
record of the last one is not acknowledged, so the worker reads a batch, runs it, and only
then reads again.

This book stands where the consumer-group worker's ``Partitions`` stands for the parts that
mark messages done (intake, claims, finisher, completer): ``done`` accepts the record, and an
"epoch" is the number of the poll the record came in. What the consumer-group worker does
with an offset, this does with an acknowledgement:

| the job's message...                         | consumer group             | share group  |
| -------------------------------------------- | -------------------------- | ------------ |
| reached a durable state (result, DLQ, dupe)  | offset done                | ACCEPT       |
| lease given back (stop, not started)         | offset left uncommitted    | RELEASE      |
| result never written (lane stopped)          | offset left uncommitted    | RELEASE      |
| still open when its lock ran out             | (no lock)                  | RELEASE (*)  |
| done after its poll was left behind          | (its assignment was lost)  | nothing      |

(*) The broker has taken the record back by then; the release only lets the client poll
again. The job's lease, not the record's lock, fences whatever of it still runs here.

Everything here runs on the poll thread (the consumer is not thread-safe).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, Message

from tenantq.consumer.work import WorkItem

log = logging.getLogger("tenantq.worker")

#: (topic, partition, offset)
RecordKey = tuple[str, int, int]
#: ``ShareConsumer.acknowledge_offset``.
Acknowledge = Callable[[str, int, int, AcknowledgeType], None]


@dataclass(eq=False)
class ShareRecords:
    """The open records of the last poll (poll thread only)."""

    acknowledge: Acknowledge
    lock_seconds: float
    clock: Callable[[], float] = time.monotonic
    #: The number of the last poll (0: none yet).
    poll_number: int = field(default=0, init=False)
    #: Records of the last poll not acknowledged yet.
    _open: set[RecordKey] = field(default_factory=set, init=False)
    _acquired_at: float = field(default=0.0, init=False)
    #: received, redelivered (delivery count above 1), accepted, released, rejected,
    #: expired (still open when the lock ran out), late (done after its poll was left).
    counts: Counter[str] = field(default_factory=Counter, init=False)

    # -- polls -----------------------------------------------------------------------------

    def acquired(self, messages: Sequence[Message]) -> None:
        """A poll's records, now locked to this member. Records with an error are left out:
        the client has acknowledged them itself (REJECT for a corrupt batch, RELEASE for one
        it could not decompress)."""
        self.poll_number += 1
        self._acquired_at = self.clock()
        for message in messages:
            if message.error() is not None:
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            self._open.add((topic, partition, offset))
            self.counts["received"] += 1
            delivered = message.delivery_count()
            if delivered is not None and delivered > 1:
                self.counts["redelivered"] += 1

    @property
    def open(self) -> int:
        """Records of the last poll not acknowledged yet."""
        return len(self._open)

    def settled(self) -> bool:
        """Every record of the last poll is acknowledged, so the next poll may go. Records
        still open when their lock has run out are released first: the broker has them back
        already, and waiting for them would stop this member for as long as they run."""
        if not self._open:
            return True
        if self.clock() - self._acquired_at < self.lock_seconds:
            return False
        log.warning(
            "%d record(s) still open when their lock ran out (%.0fs): the group has them "
            "back; their jobs' leases fence what still runs here",
            len(self._open),
            self.lock_seconds,
        )
        self.counts["expired"] += len(self._open)
        self.release_open()
        return True

    def release_open(self) -> None:
        """Give every open record back to the group (shutdown; locks run out)."""
        for key in sorted(self._open):
            self._send(key, AcknowledgeType.RELEASE)
        self._open.clear()

    # -- what the worker's parts call (the intake's ``ReadPositions``) ----------------------

    def take(self, topic: str, partition: int, offset: int, timestamp_ms: int | None = None) -> int:
        """The poll a record came in, or 0 when it is not open (the intake then drops it)."""
        return self.poll_number if (topic, partition, offset) in self._open else 0

    def owns(self, topic: str, partition: int) -> bool:
        """No member owns a partition in a share group; the lease decides who runs a job."""
        return True

    def current(self, topic: str, partition: int, epoch: int) -> bool:
        return epoch == self.poll_number

    def done(self, topic: str, partition: int, offset: int, epoch: int) -> None:
        """The job of the record reached a durable state: ACCEPT."""
        self._settle((topic, partition, offset), epoch, AcknowledgeType.ACCEPT)

    def done_items(self, items: Iterable[WorkItem]) -> None:
        for item in items:
            self._settle(item.source, item.record.epoch, AcknowledgeType.ACCEPT)

    def release_items(self, items: Iterable[WorkItem]) -> None:
        """The jobs were given back unfinished: their records go to the group again."""
        for item in items:
            self._settle(item.source, item.record.epoch, AcknowledgeType.RELEASE)

    def over_window(self, topic: str, partition: int, held: int) -> bool:
        return False  # the poll is the window

    def note_tenant(self, topic: str, partition: int, offset: int, tenant: str) -> None:
        return None  # no hot lane here

    def pause_waiting(self, consumer: Any, topic: str, partition: int) -> None:
        """A share consumer cannot pause a partition; the records that wait (a dead letter
        Kafka did not take yet) stay open, and so hold the next poll."""
        return None

    def resume_due(self, consumer: Any, topic: str, partition: int) -> None:
        return None

    # -- acknowledging -----------------------------------------------------------------------

    def _settle(self, key: RecordKey, epoch: int, kind: AcknowledgeType) -> None:
        if epoch != self.poll_number or key not in self._open:
            # Its poll was left behind (its lock ran out): the broker gave the record to the
            # group again, and whoever runs it next finds the job's row settled.
            self.counts["late"] += 1
            return
        self._open.discard(key)
        self._send(key, kind)

    def _send(self, key: RecordKey, kind: AcknowledgeType) -> None:
        name = {
            AcknowledgeType.ACCEPT: "accepted",
            AcknowledgeType.RELEASE: "released",
            AcknowledgeType.REJECT: "rejected",
        }[kind]
        try:
            # Local until the next poll or commit carries it to the broker.
            self.acknowledge(*key, kind)
            self.counts[name] += 1
        except (KafkaException, RuntimeError) as error:
            # IllegalStateException (a RuntimeError): the client no longer holds the record.
            self.counts["late"] += 1
            log.debug("acknowledgement of %s[%d]@%d refused: %s", *key, error)
