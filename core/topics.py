"""Topic names of a queue, derived in one place.

``<prefix>.<queue>`` is the main topic, ``<prefix>.<queue>.retry.<i>`` the retry tiers
(``i`` from 0, in order of increasing delay) and ``<prefix>.<queue>.dlq`` the dead-letter topic.
"""

from __future__ import annotations

from dataclasses import dataclass


def main_topic(prefix: str, queue: str) -> str:
    return f"{prefix}.{queue}"


def retry_topic(prefix: str, queue: str, tier: int) -> str:
    if tier < 0:
        raise ValueError(f"retry tier must be >= 0, got {tier}")
    return f"{prefix}.{queue}.retry.{tier}"


def dlq_topic(prefix: str, queue: str) -> str:
    return f"{prefix}.{queue}.dlq"


@dataclass(frozen=True)
class QueueTopics:
    """All topic names of one queue."""

    queue: str
    main: str
    retries: tuple[str, ...]
    dlq: str

    @classmethod
    def of(cls, prefix: str, queue: str, tiers: int) -> QueueTopics:
        return cls(
            queue=queue,
            main=main_topic(prefix, queue),
            retries=tuple(retry_topic(prefix, queue, i) for i in range(tiers)),
            dlq=dlq_topic(prefix, queue),
        )

    @property
    def all(self) -> tuple[str, ...]:
        return (self.main, *self.retries, self.dlq)

    def tier_of(self, topic: str) -> int | None:
        """The retry tier index of ``topic``, or None when it is not a retry tier."""
        try:
            return self.retries.index(topic)
        except ValueError:
            return None


def consumer_group(prefix: str, queue: str) -> str:
    """The consumer group of a queue's workers (main topic and retry tiers)."""
    return f"{prefix}.{queue}.workers"
