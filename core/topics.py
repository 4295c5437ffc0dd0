"""Topic names of a queue, derived in one place.

``<prefix>.<queue>`` is the main topic, ``<prefix>.<queue>.retry.<i>`` the retry tiers
(``i`` from 0, in order of increasing delay), ``<prefix>.<queue>.lane`` the hot lane (where
the jobs of a tenant that floods the main topic go, ``tenantq.consumer.hot_lane``) and
``<prefix>.<queue>.dlq`` the dead-letter topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def main_topic(prefix: str, queue: str) -> str:
    return f"{prefix}.{queue}"


def retry_topic(prefix: str, queue: str, tier: int) -> str:
    if tier < 0:
        raise ValueError(f"retry tier must be >= 0, got {tier}")
    return f"{prefix}.{queue}.retry.{tier}"


def tier_for_wait(wait_seconds: float, delays_seconds: Sequence[float]) -> int:
    """The first retry tier whose delay covers ``wait_seconds``; the last tier for longer
    waits (the message hops through it again until due).

    A tier's consumer pauses until the head message's due time (the ``DUE_AT_MS`` header), so
    a job sent to a tier longer than its wait still runs on time.
    """
    if not delays_seconds:
        raise ValueError("a queue needs at least one retry tier")
    for tier, delay in enumerate(delays_seconds):
        if delay >= wait_seconds:
            return tier
    return len(delays_seconds) - 1


def dlq_topic(prefix: str, queue: str) -> str:
    return f"{prefix}.{queue}.dlq"


def lane_topic(prefix: str, queue: str) -> str:
    return f"{prefix}.{queue}.lane"


@dataclass(frozen=True)
class QueueTopics:
    """All topic names of one queue."""

    queue: str
    main: str
    retries: tuple[str, ...]
    dlq: str
    lane: str

    @classmethod
    def of(cls, prefix: str, queue: str, tiers: int) -> QueueTopics:
        return cls(
            queue=queue,
            main=main_topic(prefix, queue),
            retries=tuple(retry_topic(prefix, queue, i) for i in range(tiers)),
            dlq=dlq_topic(prefix, queue),
            lane=lane_topic(prefix, queue),
        )

    @property
    def all(self) -> tuple[str, ...]:
        return (self.main, self.lane, *self.retries, self.dlq)

    @property
    def consumed(self) -> tuple[str, ...]:
        """The topics a worker of the queue reads: main, hot lane, retry tiers."""
        return (self.main, self.lane, *self.retries)

    def tier_of(self, topic: str) -> int | None:
        """The retry tier index of ``topic``, or None when it is not a retry tier."""
        try:
            return self.retries.index(topic)
        except ValueError:
            return None


def consumer_group(prefix: str, queue: str) -> str:
    """The consumer group of a queue's workers (main topic and retry tiers)."""
    return f"{prefix}.{queue}.workers"
