"""Reading from the share consumer: a poll only once every record of the last one is
acknowledged (the client refuses it otherwise), and only while the worker may claim."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, ShareConsumer

from tenantq.consumer.share.records import ShareRecords

log = logging.getLogger("tenantq.worker")


@dataclass(eq=False)
class ShareReader:
    """Polls the share consumer (poll thread only: it owns the consumer's reads)."""

    consumer: ShareConsumer
    records: ShareRecords
    #: Not stopping, and the database is up (nothing read now could be claimed).
    may_read: Callable[[], bool]
    #: Sleep until woken (``Inbox.wait``): an answer or a finished attempt ends it.
    wait: Callable[[float], object]
    #: The client can go no further (a broker without share groups answers the group's
    #: heartbeat UNSUPPORTED_VERSION, a fatal error): told why, once.
    fatal: Callable[[str], None]

    def read(self, timeout: float) -> list[Message]:
        """The records of one poll, acquired for this member, waiting at most ``timeout``;
        none while the last poll's records are open. The poll also carries the last poll's
        acknowledgements to the broker."""
        if not self.may_read() or not self.records.settled():
            if timeout > 0:
                self.wait(timeout)
            return []
        try:
            messages = list(self.consumer.poll(timeout))
        except KafkaException as error:
            problem = error.args[0] if error.args else None
            if isinstance(problem, KafkaError) and problem.fatal():
                self.fatal(problem.str())
            else:
                log.warning("share consumer poll failed: %s", error)
            return []
        except RuntimeError as error:
            # IllegalStateException (a record left unacknowledged; never here, since the
            # records are settled) or a concurrent use of the consumer.
            log.warning("share consumer poll failed: %s", error)
            return []
        self.records.acquired(messages)
        usable = []
        for message in messages:
            problem = message.error()
            if problem is None:
                usable.append(message)
            else:
                log.warning("share consumer record error: %s", problem)
        return usable
