"""Reading from the consumer: with the first message that arrives, never more than the
read-ahead budget leaves, and without waiting in Kafka while an answer is due elsewhere."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message

log = logging.getLogger("tenantq.worker")

#: The poll loop's wait while work is in flight (an answer ends it sooner).
IN_FLIGHT_WAIT_SECONDS = 0.001
#: How often the poll loop asks the client for a message while the read-ahead budget is full.
READ_WHEN_FULL_SECONDS = 0.1


@dataclass(eq=False)
class Reader:
    """Reads batches of messages (poll thread only: it owns the consumer's reads)."""

    consumer: Consumer
    #: Messages taken per read at most (``poll_batch``).
    batch: int
    #: What is left of the read-ahead budget (``Partitions.read_room``), None: unbounded.
    room: Callable[[], int | None]
    #: Sleep until woken (``Inbox.wait``): an answer or a finished attempt ends it.
    wait: Callable[[float], object]
    clock: Callable[[], float] = time.monotonic
    #: When the client was last asked for messages (``clock``).
    _last_read: float = field(default=0.0, init=False)

    def read(self, timeout: float) -> list[Message]:
        """The usable messages the consumer holds, waiting at most ``timeout`` for a first.

        ``consume(n, timeout)`` returns only once it has ``n`` messages or the timeout has
        passed: at a light load every job would wait out the timeout (0-100 ms). ``poll``
        returns with the first message; the rest of what is already fetched follows
        without waiting."""
        messages = self._fetch(timeout)
        if not messages:
            return messages
        return [message for message in messages if _usable(message)]

    def _fetch(self, timeout: float) -> list[Message]:
        consumer = self.consumer
        batch = self.batch
        room = self.room()
        if room is not None and room < batch:
            if room <= 0:
                # The read-ahead budget is full: nothing is read until results free some of
                # it. The client is asked now and then all the same (for one message): a
                # rebalance's callbacks are served there, and librdkafka drops a member that
                # stops asking for longer than max.poll.interval.ms.
                if self.clock() - self._last_read < READ_WHEN_FULL_SECONDS:
                    if timeout > 0:
                        self.wait(min(timeout, IN_FLIGHT_WAIT_SECONDS))
                    return []
                room = 1
            batch = room
        self._last_read = self.clock()
        if 0 < timeout <= IN_FLIGHT_WAIT_SECONDS:
            # Work in flight: its answer wakes the loop at once, where a wait in Kafka would
            # sit out the timeout; the fetched messages are taken right after.
            self.wait(timeout)
            return consumer.consume(num_messages=batch, timeout=0)
        if timeout <= 0:
            return consumer.consume(num_messages=batch, timeout=0)
        first = consumer.poll(timeout)
        if first is None:
            return []
        return (
            [first, *consumer.consume(num_messages=batch - 1, timeout=0)] if batch > 1 else [first]
        )


def _usable(message: Message) -> bool:
    error = message.error()
    if error is None:
        return True
    if error.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer error: %s", error)
    return False
