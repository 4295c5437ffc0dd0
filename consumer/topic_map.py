"""The topics a worker consumes, and what each one is: which queue, which retry tier, lane or
main topic. Built once from the settings; nothing changes it while the worker runs."""

from __future__ import annotations

from dataclasses import dataclass

from tenantq.settings import Settings
from tenantq.topic_admin import queue_topics
from tenantq.topics import QueueTopics


@dataclass(frozen=True)
class TopicMap:
    """The topics of a worker's queues (read by every thread, changed by none)."""

    #: Queue -> its topic names.
    by_queue: dict[str, QueueTopics]
    #: Consumed topic -> (its queue, its retry tier or None for the main topic and the lane).
    queue_of: dict[str, tuple[str, int | None]]
    #: The queues' hot lanes (their messages are work like the main topic's).
    lanes: frozenset[str]
    #: The queues' main topics.
    mains: frozenset[str]

    @classmethod
    def of(cls, settings: Settings, queues: list[str]) -> TopicMap:
        by_queue = {name: queue_topics(settings, name) for name in queues}
        queue_of: dict[str, tuple[str, int | None]] = {}
        for name, topics in by_queue.items():
            queue_of[topics.main] = (name, None)
            queue_of[topics.lane] = (name, None)
            for tier, topic in enumerate(topics.retries):
                queue_of[topic] = (name, tier)
        return cls(
            by_queue,
            queue_of,
            frozenset(topics.lane for topics in by_queue.values()),
            frozenset(topics.main for topics in by_queue.values()),
        )

    @property
    def consumed(self) -> list[str]:
        """Every topic the worker subscribes to, queue by queue."""
        return [topic for topics in self.by_queue.values() for topic in topics.consumed]

    @property
    def queue_of_main(self) -> dict[str, str]:
        """Main topic -> its queue."""
        return {topics.main: name for name, topics in self.by_queue.items()}
