"""The unit the worker moves around: one Kafka message, its decoded envelope and its lease."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tenantq.consumer.outcomes import Verdict
from tenantq.producer.publisher import Outgoing, dead_letter
from tenantq.schemas.envelope import Envelope
from tenantq.store.job_store import ClaimRequest, Lease
from tenantq.topics import QueueTopics

#: The dispatcher lane of a queue's hot lane is the queue's name with this suffix.
HOT_LANE_SUFFIX = "~lane"

if TYPE_CHECKING:
    from tenantq.consumer.intake import Polled


@dataclass(eq=False, slots=True)
class WorkItem:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    #: The Kafka record this item came from (its headers are read from it when needed).
    record: Polled
    timestamp_ms: int | None
    queue: str
    envelope: Envelope
    max_attempts: int
    tier: int | None = None
    #: Read from the queue's hot lane (not its main topic or a retry tier).
    lane: bool = False
    lease: Lease | None = None
    #: For jobs leased by another live worker: when to try the claim again.
    retry_claim_at: float = 0.0
    #: A tenant's limit held it back, and it has not been leased or let go since: its message
    #: is out of its partition's read-ahead window (``Throttles``).
    held_back: bool = False
    payload_sha256: bytes = field(default=b"")
    #: The envelope's, copied into slots: read a dozen times per job, where a property is a
    #: call each time.
    job_id: uuid.UUID = field(init=False)
    tenant_id: str = field(init=False)
    job_type: str = field(init=False)

    def __post_init__(self) -> None:
        envelope = self.envelope
        self.job_id = envelope.job_id
        self.tenant_id = envelope.tenant_id
        self.job_type = envelope.job_type
        if not self.payload_sha256:
            self.payload_sha256 = hashlib.sha256(envelope.payload).digest()

    @property
    def dispatch_lane(self) -> str:
        """Its lane in the dispatcher: the queue, or the queue's hot lane."""
        return f"{self.queue}{HOT_LANE_SUFFIX}" if self.lane else self.queue

    @property
    def source(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return self.record.headers

    def claim_request(self) -> ClaimRequest:
        return ClaimRequest.of(
            self.envelope,
            queue=self.queue,
            max_attempts=self.max_attempts,
            origin=self.source,
            payload_sha256=self.payload_sha256,
        )

    def dead_letter_record(
        self, topics: QueueTopics, verdict: Verdict, *, attempts: int, worker: str
    ) -> Outgoing:
        """Its record for the queue's DLQ: the message as it was read, and why it died (the
        dead ``verdict``)."""
        return dead_letter(
            topics,
            key=self.key,
            value=self.value,
            base_headers=self.headers,
            error_class=verdict.error_class or "Dead",
            error_message=verdict.error_message or "",
            attempts=attempts,
            worker=worker,
            source=self.source,
        )
