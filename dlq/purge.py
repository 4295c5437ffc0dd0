"""Purge of a DLQ (`tenantq dlq purge`): what Kafka can honestly do, and nothing it cannot.

Kafka cannot delete single records, only every record of a partition below an offset
(``DeleteRecords``). So a purge takes one condition, ``--until``: per partition, the cut is the
first offset whose timestamp is at or after that time, and every record before it is deleted.
That is exact: Kafka's time index returns the *earliest* offset at or after the time, so all
records below the cut are older. Filters on tenant, job type, error class, job id or
``--since`` would have to delete records they do not match, and are refused.

Job rows are not changed: a dead job stays dead (terminal) and keeps its payload in
Postgres; it only can no longer be replayed from the DLQ. The summary says how many of the
purged jobs are still dead, and an audit row (action ``purge``) records who purged what.
Unreadable records (``tenantq.dlq.records``) below the cut are deleted with the rest (a purge
is how they leave the topic); the plan counts them, as no job can be named for them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tenantq.dlq.kafka_client import ClientReport, error_text
from tenantq.dlq.reader import METADATA_TIMEOUT, DeadLetterReader, DeadLetterReadError
from tenantq.settings import Settings
from tenantq.store import replay as replay_store
from tenantq.store.engine import connect

#: Job ids kept in the audit row of one purge; the count is always exact.
AUDIT_JOB_IDS_LIMIT = 100_000
_STATE_CHUNK = 1_000


@dataclass
class PurgePlan:
    """Per partition, the records a purge deletes: ``[low, cut)``."""

    topic: str
    until: dt.datetime
    cuts: dict[int, tuple[int, int]] = field(default_factory=dict)
    job_ids: list[uuid.UUID] = field(default_factory=list)
    #: The partition of each of ``job_ids``' records.
    job_partitions: list[int] = field(default_factory=list)
    #: Records without a job id (the worker could not decode them) that do parse.
    undecodable: int = 0
    #: Records that do not parse (deleted all the same; no job is named for them).
    unreadable: int = 0
    #: States of the purged jobs' rows ("no row" for records without one).
    job_states: Counter[str] = field(default_factory=Counter)

    @property
    def records(self) -> int:
        return sum(max(0, cut - low) for low, cut in self.cuts.values())

    def records_in(self, partitions: Iterable[int]) -> int:
        """The records the plan deletes from ``partitions``."""
        return sum(max(0, self.cuts[p][1] - self.cuts[p][0]) for p in set(partitions))

    def job_ids_in(self, partitions: Iterable[int]) -> list[uuid.UUID]:
        """``job_ids`` of the records in ``partitions``."""
        chosen = set(partitions)
        return [i for i, p in zip(self.job_ids, self.job_partitions, strict=True) if p in chosen]


def plan_purge(settings: Settings, queue: str, until: dt.datetime) -> PurgePlan:
    """Work out what ``purge --until`` deletes, reading the records to count their jobs."""
    with DeadLetterReader(settings, queue) as reader:
        plan = PurgePlan(reader.topic, until)
        plan.cuts = _cuts(settings, reader.topic, reader.ranges, until)
        # Read exactly the records below the cuts, to name their jobs in the audit row.
        reader.ranges = {p: cut for p, cut in plan.cuts.items() if cut[0] < cut[1]}
        for letter in reader.records():
            if letter.unreadable:
                plan.unreadable += 1
            elif letter.job_id is None:
                plan.undecodable += 1
            elif len(plan.job_ids) < AUDIT_JOB_IDS_LIMIT:
                plan.job_ids.append(letter.job_id)
                plan.job_partitions.append(letter.dlq_partition)
    with connect(settings, autocommit=True, application_name="tenantq-dlq") as connection:
        for start in range(0, len(plan.job_ids), _STATE_CHUNK):
            chunk = plan.job_ids[start : start + _STATE_CHUNK]
            found = replay_store.job_state_summary(connection, chunk)
            plan.job_states.update(found[i].state if i in found else "no row" for i in chunk)
    return plan


def execute_purge(
    settings: Settings, plan: PurgePlan, purged: dict[int, int] | None = None
) -> dict[int, int]:
    """Delete the planned records; returns each partition's new low watermark. Every
    partition's deletion is waited for; where one fails, ``DeadLetterReadError`` is raised
    after all of them, and ``purged`` (when given) holds the partitions that were purged."""
    wanted = [
        TopicPartition(plan.topic, p, cut) for p, (low, cut) in plan.cuts.items() if cut > low
    ]
    result = {} if purged is None else purged
    if not wanted:
        return result
    client = ClientReport(settings.require_bootstrap_servers())
    admin = AdminClient(settings.kafka_client_config(**client.config()))
    futures = admin.delete_records(wanted, request_timeout=30)
    failures: list[str] = []
    for partition, future in futures.items():
        try:
            deleted = future.result()
        except KafkaException as error:
            failures.append(f"partition {partition.partition}: {error_text(error)}")
            continue
        result[partition.partition] = int(deleted.low_watermark)
    if failures:
        failure = (
            f"deleting records of {plan.topic} failed in {len(failures)} of {len(wanted)} "
            f"partitions ({'; '.join(sorted(failures)[:3])})"
        )
        raise DeadLetterReadError(client.describe(failure))
    return result


def _cuts(
    settings: Settings, topic: str, ranges: dict[int, tuple[int, int]], until: dt.datetime
) -> dict[int, tuple[int, int]]:
    client = ClientReport(settings.require_bootstrap_servers())
    consumer = Consumer(
        settings.kafka_client_config(
            **{
                "group.id": f"tenantq-dlq-purge-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                **client.config(),
            }
        )
    )
    try:
        # Kafka reads a negative time as "latest" or "earliest": before 1970 is 0.
        until_ms = max(0, int(until.timestamp() * 1000))
        asked = [TopicPartition(topic, p, until_ms) for p in ranges]
        found = consumer.offsets_for_times(asked, timeout=METADATA_TIMEOUT)
    except KafkaException as error:
        failure = f"reading the offsets of {topic}: {error_text(error)}"
        raise DeadLetterReadError(client.describe(failure)) from None
    finally:
        consumer.close()
    cuts = {}
    for item in found:
        low, high = ranges[item.partition]
        # No record at or after the time: everything there now is older.
        cut = high if item.offset in (OFFSET_END, -1) else item.offset
        cuts[item.partition] = (low, max(low, min(cut, high)))
    return cuts
