"""The relay's encoder of the entries ``tenantq_enqueue`` wrote in SQL.

The SQL function writes a job's row and an entry without its Kafka record: the wire format
(the Avro envelope, the headers) and the placement (murmur2 of the key, the placement table's
spreads, pins and hot lanes) have one implementation, the producer's ``RequestPreparer``, and
the relay runs it here before it publishes. What the function stored is the request:

| envelope / record     | from the job row                                              |
| --------------------- | ------------------------------------------------------------- |
| id, queue, job type,  | as stored                                                     |
| tenant, key           |                                                               |
| payload               | ``payload``: the JSON text the function encoded and hashed    |
| created_at ("now")    | ``enqueued_at`` (the function's clock): the same envelope     |
|                       | whenever it is encoded                                        |
| run_after, topic      | ``run_after`` if after ``enqueued_at`` (a retry tier), else   |
|                       | the main topic or the tenant's hot lane                       |
| max_attempts          | none: the worker's job type decides                           |

A job the relay's settings refuse (an envelope over ``max_message_bytes`` when the relay's
limit is lower than the one registered) is dead with the reason and its entry deleted: one
entry never holds its queue's relay back.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from tenantq.errors import InvalidJobError, TenantqError
from tenantq.job_ids import new_job_id_ints
from tenantq.outbox.outbox import declared_partition_counts
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.request import EnqueueRequest, RequestPreparer
from tenantq.producer.validation import EncodedPayload
from tenantq.settings import Settings
from tenantq.store import outbox as outbox_store
from tenantq.store.engine import DeploymentConnection
from tenantq.store.placement import PlacementReader

log = logging.getLogger("tenantq.outbox")

#: What one job's row can make ``RequestPreparer.prepare`` raise: the job's own problem, not
#: the relay's (a database or broker error propagates and fails the round).
_REFUSALS = (TenantqError, ValueError, TypeError, OverflowError)


class EntryEncoder:
    """Encodes and places the unencoded entries of a relay's batches (``encode``).

    Reads placements on a connection of its own, opened at the first entry it encodes (a
    deployment that never enqueues in SQL never opens it); ``close`` it with the relay.
    """

    def __init__(self, settings: Settings) -> None:
        # Settings without a database make a relay that fails its rounds, not its construction.
        self._placement_reader = (
            PlacementReader(settings) if settings.database_url is not None else None
        )
        self._preparer = RequestPreparer(
            settings,
            None,
            PlacementBook(self._placement_reader, settings.producer.placement_ttl_seconds),
            declared_partition_counts(settings),
            new_job_id_ints,
        )

    def encode(
        self,
        connection: DeploymentConnection,
        batch: Sequence[outbox_store.Entry | outbox_store.UnencodedEntry],
    ) -> list[outbox_store.Entry]:
        """``batch`` with every ``UnencodedEntry`` encoded (its record and its job's placement
        committed), in the same order; entries whose job was refused or is gone are left out."""
        unencoded = [entry.id for entry in batch if type(entry) is outbox_store.UnencodedEntry]
        if not unencoded:
            return [entry for entry in batch if type(entry) is outbox_store.Entry]
        encoded: dict[int, outbox_store.Entry] = {}
        with connection.transaction():
            jobs = outbox_store.outbox_unencoded_jobs(connection, unencoded)
            records: list[outbox_store.EncodedEntry] = []
            refused: list[outbox_store.RefusedEntry] = []
            for job in jobs:
                try:
                    record = self.record_of(job)
                except _REFUSALS as error:
                    refused.append(
                        outbox_store.RefusedEntry(
                            job.entry_id, job.job_id, _error_class(error), str(error)
                        )
                    )
                    continue
                records.append(record)
                encoded[job.entry_id] = record.entry
            outbox_store.outbox_encode(connection, records)
            outbox_store.outbox_refuse(connection, refused)
        for item in refused:
            log.warning(
                "outbox: job %s of queue entry %d cannot be published (%s: %s); it is dead",
                item.job_id, item.entry_id, item.error_class, item.error_message,
            )  # fmt: skip
        return [
            entry if type(entry) is outbox_store.Entry else encoded[entry.id]
            for entry in batch
            if type(entry) is outbox_store.Entry or entry.id in encoded
        ]

    def record_of(self, job: outbox_store.UnencodedJob) -> outbox_store.EncodedEntry:
        """The Kafka record of ``job``'s entry, as the producer would have made it when the
        job was enqueued; raises the producer's error when the job cannot be published."""
        if job.payload is None:
            raise InvalidJobError(f"job {job.job_id} has no payload to publish")
        enqueued_at = job.enqueued_at or dt.datetime.now(dt.UTC)
        request = EnqueueRequest(
            job_type=job.job_type,
            tenant=job.tenant_id,
            payload=EncodedPayload(job.payload),
            queue=job.queue,
            job_id=job.job_id,
            run_after=job.run_after,
            idempotency_key=job.idempotency_key,
        )
        message = self._preparer.prepare(request, enqueued_at)
        entry = outbox_store.Entry(
            id=job.entry_id,
            job_id=job.job_id,
            topic=message.topic,
            partition=message.partition,
            key=message.key,
            value=message.value,
            headers=[
                (name, value.decode() if isinstance(value, bytes) else value)
                for name, value in message.kafka_headers()
            ],
        )
        return outbox_store.EncodedEntry(entry, message.key.decode())

    def close(self) -> None:
        """Close the placement reader's connection."""
        if self._placement_reader is not None:
            self._placement_reader.close()


def _error_class(error: BaseException) -> str:
    """The error's class as a job's ``last_error_class`` names it (the worker's way: module
    and name, a builtin's name alone)."""
    kind = type(error)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
