"""The outbox relay: publishes committed outbox entries to Kafka, then forgets them.

One relay per queue is active at a time: it holds the session advisory lock
(``tenantq.store.locks.OUTBOX_RELAY``, keyed by the queue's main topic) on its own
connection; the relays of other workers stand by and try the lock every
``standby_seconds``, so when the active one dies (its connection closes, Postgres releases
the lock) another takes over within seconds.

Each round of a held queue (``tenantq.store.outbox``): stamp what committed since the last
round with a new generation, read the oldest ``batch_size`` entries by (generation, id),
publish them with an idempotent producer (the producer's own configuration, so retries keep
the order within a partition), wait for the acknowledgements, delete the acknowledged
entries. Per tenant this publishes in commit order: entries that committed before a round
go before those that committed after it; within one round's generation, by insert order.

Delivery is at least once. A relay killed after Kafka acknowledged a batch and before the
delete publishes that batch again; the worker's claim matches the job by id and payload
hash (the row the enqueue wrote has the worker's hash), so the second copy runs nothing.

Entries the SQL function ``tenantq_enqueue`` wrote have no record yet: a round encodes them
first (``tenantq.outbox.entry_encoder``) and commits their records, so a relay that dies
after that publishes the same bytes again. Every relay registers its queues and its settings
when it connects (``tenantq_outbox_queues``): the function accepts the queues some relay
serves, within that relay's size limits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import confluent_kafka

from tenantq.background import ServiceLoop
from tenantq.errors import TenantqError
from tenantq.kafka_access import ClientReport
from tenantq.outbox.entry_encoder import EntryEncoder
from tenantq.producer.config import producer_config
from tenantq.producer.delivery import confirmed, produce_when_room
from tenantq.settings import Settings
from tenantq.store import locks
from tenantq.store import outbox as outbox_store
from tenantq.store.engine import DeploymentConnection, LazyConnection
from tenantq.topics import main_topic

log = logging.getLogger("tenantq.outbox")

ProducerFactory = Callable[[dict[str, Any]], Any]


class KafkaUnavailable(TenantqError):
    """Kafka did not acknowledge every entry of a round (the rest is retried)."""


class EntryPublisher:
    """Publishes entries and reports which Kafka acknowledged, within a timeout that a
    stopping relay can cut short."""

    def __init__(
        self,
        settings: Settings,
        *,
        producer_factory: ProducerFactory = confluent_kafka.Producer,
    ) -> None:
        config = producer_config(settings, {"client.id": "tenantq-outbox-relay"})
        #: What the client reports: a refused login ends a round at once, with its reason.
        self.client = ClientReport(settings.require_bootstrap_servers())
        self._producer = producer_factory({**config, **self.client.config()})
        self._timeout = settings.outbox.publish_timeout_seconds

    def publish(
        self, entries: Sequence[outbox_store.Entry], stopping: Callable[[], bool]
    ) -> list[int]:
        """Produce ``entries`` in order; return the ids of those Kafka acknowledged. Gives up
        waiting as soon as the cluster refuses the client (``refusal`` says why)."""
        acknowledged: list[int] = []
        settled = 0

        def report(entry_id: int) -> Callable[[Any, Any], None]:
            def on_delivery(error: Any, message: Any) -> None:
                nonlocal settled
                settled += 1
                # Not confirmed (no offset): the entry stays in the outbox for the next round.
                if confirmed(error, message):
                    acknowledged.append(entry_id)

            return on_delivery

        for entry in entries:
            produce_when_room(
                self._producer,
                entry.topic,
                value=entry.value,
                key=entry.key,
                partition=entry.partition,
                headers=entry.headers,
                on_delivery=report(entry.id),
            )
        deadline = time.monotonic() + self._timeout
        while (
            settled < len(entries)
            and time.monotonic() < deadline
            and not stopping()
            and self.client.refused is None
        ):
            self._producer.flush(0.2)
        if settled < len(entries):
            # Not sent yet: drop them from the local queue so that a Kafka back later does
            # not deliver this round's copy after the next round's (they are retried).
            self._producer.purge(in_queue=True, in_flight=False, blocking=False)
            self._producer.poll(0)
        return acknowledged

    def close(self) -> None:
        self._producer.flush(min(self._timeout, 5.0))


class RelayService(ServiceLoop):
    """The relay of ``queues`` as a ``BackgroundService`` (also ``tenantq outbox relay``).

    Owns one database connection (which holds the advisory locks of the queues it serves),
    one Kafka producer and the encoder of entries written in SQL, all in its thread.
    """

    def __init__(
        self,
        settings: Settings,
        queues: Sequence[str],
        *,
        producer_factory: ProducerFactory = confluent_kafka.Producer,
        name: str = "outbox-relay",
    ) -> None:
        super().__init__(name)
        for queue in queues:
            settings.queue(queue)
        self.settings = settings
        self.main_topics = {main_topic(settings.topic_prefix, queue): queue for queue in queues}
        self._producer_factory = producer_factory
        self._database = LazyConnection(settings, "tenantq-outbox-relay", on_open=self._connected)
        self._publisher: EntryPublisher | None = None
        self._encoder = EntryEncoder(settings)
        #: Main topics whose lock this relay holds, and when it last tried the others.
        self.held: set[str] = set()
        self._tried_at = float("-inf")
        #: Entries published since start (for tests and the CLI's summary).
        self.published = 0
        self._kafka_down = False

    # -- rounds -----------------------------------------------------------------------------

    def run_round(self) -> float:
        outbox = self.settings.outbox
        connection = self._database.get()
        if len(self.held) < len(self.main_topics):
            now = time.monotonic()
            if now - self._tried_at >= outbox.standby_seconds:
                self._tried_at = now
                self._take_locks(connection)
        more = False
        for topic in sorted(self.held):
            if self.stopping:
                break
            more |= self.relay(connection, topic)
        if not self.held:
            return outbox.standby_seconds
        return 0.0 if more else outbox.poll_interval_seconds

    def relay(self, connection: DeploymentConnection, topic: str) -> bool:
        """One round of one held queue; True when a full batch suggests more is waiting."""
        batch_size = self.settings.outbox.batch_size
        batch = outbox_store.outbox_next_batch(connection, topic, batch_size)
        if not batch:
            return False
        entries = self._encoder.encode(connection, batch)
        publisher = self._publisher_of()
        acknowledged = publisher.publish(entries, lambda: self.stopping)
        outbox_store.outbox_delete(connection, acknowledged)
        self.published += len(acknowledged)
        if len(acknowledged) < len(entries):
            refusal = publisher.client.refusal()
            if refusal is not None:
                raise refusal
            raise KafkaUnavailable(
                f"{len(entries) - len(acknowledged)} of {len(entries)} outbox entries of "
                f"{self.main_topics[topic]!r} not acknowledged"
            )
        return len(batch) == batch_size

    def drain(self) -> int:
        """Publish everything committed now in the queues whose lock is free, then return
        how many entries were published (``tenantq outbox relay --once``)."""
        connection = self._database.get()
        self._take_locks(connection)
        before = self.published
        for topic in sorted(self.held):
            while self.relay(connection, topic):
                pass
        return self.published - before

    def _take_locks(self, connection: DeploymentConnection) -> None:
        for topic, queue in self.main_topics.items():
            if topic in self.held:
                continue
            if locks.try_lock(connection, locks.OUTBOX_RELAY, locks.name_key(topic)):
                self.held.add(topic)
                log.info("%s: relaying queue %r", self.name, queue)

    # -- resources ---------------------------------------------------------------------------

    def _connected(self, connection: DeploymentConnection) -> None:
        """A new connection holds no lock yet: forget those of the last one, and try at once.
        Register the queues for ``tenantq_enqueue`` (the settings may have changed since)."""
        self.held.clear()
        self._tried_at = float("-inf")
        queues = sorted(self.main_topics.values())
        outbox_store.outbox_queues_register(
            connection,
            outbox_store.RegisteredQueues(
                queues=queues,
                main_topics=[main_topic(self.settings.topic_prefix, queue) for queue in queues],
                max_payload_bytes=self.settings.max_payload_bytes,
                max_message_bytes=self.settings.max_message_bytes,
                default_max_attempts=self.settings.worker.default_max_attempts,
            ),
        )

    def _publisher_of(self) -> EntryPublisher:
        if self._publisher is None:
            self._publisher = EntryPublisher(self.settings, producer_factory=self._producer_factory)
        return self._publisher

    def outage(self, error: BaseException) -> str:
        down = super().outage(error)
        self._kafka_down = down == "Kafka"
        return down

    def reset(self) -> None:
        if self._kafka_down and self._database.is_open:
            # Kafka is down, Postgres is not: keep the locks (a standby would fare no better).
            return
        # Closing the connection releases the advisory locks: a standby may take over.
        self.held.clear()
        self._database.close()

    def close(self) -> None:
        self._kafka_down = False
        self.reset()
        self._encoder.close()
        if self._publisher is not None:
            publisher, self._publisher = self._publisher, None
            publisher.close()
