"""``tenantq topics ensure``: declare, check and create every queue's topics.

Each queue declares a main topic, its retry tiers and a DLQ (names from ``tenantq.topics``).
Missing topics are created; an existing topic with fewer partitions than declared, or a
different replication factor, is drift and is reported as an error rather than ignored
(growing partitions silently would move tenants between partitions).

A queue that declares no replication factor gets the cluster's (``replication_for``): one
replica per broker up to three, and with three ``min.insync.replicas=2``, so a write
acknowledged to a producer (acks=all) is on two brokers and one broker may be down. The
brokers are counted when topics are ensured; a topic created while a broker was away has
fewer replicas and is reported as drift once the broker is back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tenantq.errors import TopicDriftError
from tenantq.kafka_access import read_metadata, reporting_admin
from tenantq.settings import Settings
from tenantq.topics import QueueTopics

#: Replicas a topic gets on a cluster of this many brokers or more, when none is declared.
FULL_REPLICATION = 3
#: Replicas a write with acks=all waits for on a fully replicated topic.
FULL_REPLICATION_MIN_INSYNC = 2


@dataclass(frozen=True)
class TopicSpec:
    """A declared topic. ``replication_factor`` ``None``: the cluster's (``resolved``)."""

    name: str
    partitions: int
    replication_factor: int | None
    config: dict[str, str] = field(default_factory=dict)

    def resolved(self, broker_count: int) -> TopicSpec:
        """This topic as created on a cluster of ``broker_count`` brokers: its replication
        factor, and ``min.insync.replicas`` 2 when it has three replicas (unless the queue's
        topic config says otherwise)."""
        replicas = self.replication_factor or replication_for(broker_count)
        config = dict(self.config)
        if replicas >= FULL_REPLICATION:
            config.setdefault("min.insync.replicas", str(FULL_REPLICATION_MIN_INSYNC))
        return TopicSpec(self.name, self.partitions, replicas, config)


def replication_for(broker_count: int) -> int:
    """The replication factor of a topic that declares none: one replica per broker, up to
    three."""
    return max(1, min(FULL_REPLICATION, broker_count))


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


def replication_drift(replicas: set[int], declared: int | None, broker_count: int) -> str | None:
    """What is wrong with an existing topic's replica counts, or ``None``. A declared factor
    must match exactly. The cluster's is a floor: a broker that is down leaves the count of
    live brokers short, and three replicas made before it went are not drift; fewer than the
    cluster calls for (a topic created during an outage) are."""
    if not replicas:
        return None
    if declared is not None:
        if replicas == {declared}:
            return None
        return f"replication factor {sorted(replicas)}, declared {declared}"
    wanted = replication_for(broker_count)
    if min(replicas) >= wanted:
        return None
    return (
        f"replication factor {sorted(replicas)}, the cluster's {broker_count} brokers call "
        f"for {wanted}"
    )


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(settings.kafka_client_config())


def ensure_topics(
    settings: Settings, queues: list[str] | None = None, *, timeout: float = 30.0
) -> EnsureReport:
    """Create missing topics; raise ``TopicDriftError`` naming every drifted topic, and
    ``KafkaAccessRefused`` at once when the cluster refuses the client's credentials or TLS."""
    admin, client = reporting_admin(settings)
    metadata = read_metadata(admin, client, timeout=timeout, poll=lambda: admin.poll(0))
    broker_count = len(metadata.brokers)
    report = EnsureReport()
    missing: list[TopicSpec] = []
    for declared in declared_topics(settings, queues):
        spec = declared.resolved(broker_count)
        existing = metadata.topics.get(spec.name)
        if existing is None or existing.error is not None:
            missing.append(spec)
            continue
        report.existing.append(spec.name)
        partitions = len(existing.partitions)
        if partitions != spec.partitions:
            report.drift.append(f"{spec.name}: {partitions} partitions, declared {spec.partitions}")
        replicas = {len(p.replicas) for p in existing.partitions.values()}
        drifted = replication_drift(replicas, declared.replication_factor, broker_count)
        if drifted:
            report.drift.append(f"{spec.name}: {drifted}")
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(
                    s.name,
                    num_partitions=s.partitions,
                    replication_factor=s.replication_factor or replication_for(broker_count),
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
