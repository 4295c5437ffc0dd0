"""``tenantq topics ensure``: declare, check and create every queue's topics.

Each queue declares a main topic, its retry tiers and a DLQ (names from ``tenantq.topics``).
Missing topics are created; an existing topic with fewer partitions than declared, or a
different replication factor, is drift and is reported as an error rather than ignored
(growing partitions silently would move tenants between partitions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tenantq.errors import TopicDriftError
from tenantq.settings import Settings
from tenantq.topics import QueueTopics


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass
class EnsureReport:
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)


def queue_topics(settings: Settings, queue: str) -> QueueTopics:
    definition = settings.queue(queue)
    return QueueTopics.of(settings.topic_prefix, queue, len(definition.retry_delays_seconds))


def declared_topics(settings: Settings, queues: list[str] | None = None) -> list[TopicSpec]:
    specs = []
    for queue in queues or list(settings.queues):
        definition = settings.queue(queue)
        names = queue_topics(settings, queue)
        config = dict(definition.topic_config)
        # Messages up to the largest envelope tenantq accepts, plus headers.
        config.setdefault("max.message.bytes", str(settings.max_message_bytes + 64 * 1024))
        for topic in (names.main, names.lane):
            specs.append(
                TopicSpec(topic, definition.partitions, definition.replication_factor, dict(config))
            )
        for topic in (*names.retries, names.dlq):
            specs.append(
                TopicSpec(
                    topic, definition.tier_partitions, definition.replication_factor, dict(config)
                )
            )
    return specs


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(settings.kafka_client_config())


def ensure_topics(
    settings: Settings, queues: list[str] | None = None, *, timeout: float = 30.0
) -> EnsureReport:
    """Create missing topics; raise ``TopicDriftError`` naming every drifted topic."""
    admin = admin_client(settings)
    specs = declared_topics(settings, queues)
    metadata = admin.list_topics(timeout=timeout)
    report = EnsureReport()
    missing: list[TopicSpec] = []
    for spec in specs:
        existing = metadata.topics.get(spec.name)
        if existing is None or existing.error is not None:
            missing.append(spec)
            continue
        report.existing.append(spec.name)
        partitions = len(existing.partitions)
        if partitions != spec.partitions:
            report.drift.append(f"{spec.name}: {partitions} partitions, declared {spec.partitions}")
        replicas = {len(p.replicas) for p in existing.partitions.values()}
        if replicas and replicas != {spec.replication_factor}:
            report.drift.append(
                f"{spec.name}: replication factor {sorted(replicas)}, "
                f"declared {spec.replication_factor}"
            )
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(
                    s.name,
                    num_partitions=s.partitions,
                    replication_factor=s.replication_factor,
                    config=s.config,
                )
                for s in missing
            ],
            operation_timeout=timeout,
        )
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as error:
                # Created concurrently by another process: fine, it is checked next run.
                if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
            report.created.append(name)
        _wait_for_leaders(admin, [s.name for s in missing], timeout)
    if report.drift:
        raise TopicDriftError("topic drift: " + "; ".join(report.drift))
    return report


def _wait_for_leaders(admin: AdminClient, names: list[str], timeout: float) -> None:
    """New topics are usable once every partition has a leader."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metadata = admin.list_topics(timeout=timeout)
        ready = all(
            name in metadata.topics
            and metadata.topics[name].error is None
            and all(p.leader >= 0 for p in metadata.topics[name].partitions.values())
            for name in names
        )
        if ready:
            return
        time.sleep(0.1)


def delete_topics(settings: Settings, names: list[str], timeout: float = 30.0) -> None:
    """Delete topics (tests and `dev` clean-up only)."""
    admin = admin_client(settings)
    if not names:
        return
    for future in admin.delete_topics(names, operation_timeout=timeout).values():
        try:
            future.result()
        except KafkaException as error:
            if error.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                raise
