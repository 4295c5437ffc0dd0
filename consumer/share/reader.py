"""Reading from the share consumer: a poll only once every record of the last one is
acknowledged (the client refuses it otherwise), and only while the worker may claim."""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaException, Message, ShareConsumer

from tenantq.consumer.share.records import ShareRecords

log = logging.getLogger("tenantq.worker")


class ShareReader:
    """Polls the share consumer (poll thread only: it owns the consumer's reads)."""

    def __init__(
        self,
        consumer: ShareConsumer,
        records: ShareRecords,
        may_read: Callable[[], bool],
        wait: Callable[[float], object],
    ) -> None:
        self._consumer = consumer
        self._records = records
        #: Not stopping, and the database is up (nothing read now could be claimed).
        self._may_read = may_read
        #: Sleep until woken (``Inbox.wait``): an answer or a finished attempt ends it.
        self._wait = wait

    def read(self, timeout: float) -> list[Message]:
        """The records of one poll, acquired for this member, waiting at most ``timeout``;
        none while the last poll's records are open. The poll also carries the last poll's
        acknowledgements to the broker."""
        if not self._may_read() or not self._records.settled():
            if timeout > 0:
                self._wait(timeout)
            return []
        try:
            messages = list(self._consumer.poll(timeout))
        except (KafkaException, RuntimeError) as error:
            # RuntimeError: IllegalStateException (a record left unacknowledged; never here,
            # since the records are settled) or a concurrent use of the consumer.
            log.warning("share consumer poll failed: %s", error)
            return []
        self._records.acquired(messages)
        usable = []
        for message in messages:
            problem = message.error()
            if problem is None:
                usable.append(message)
            else:
                log.warning("share consumer record error: %s", problem)
        return usable
