"""The share group of a worker's queues: its id, its client configuration, and the group
configuration that lives on the broker.

A share group keeps its settings on the broker, not in the client: where a new group starts
reading (``share.auto.offset.reset``, ``latest`` by default: a group created after jobs were
enqueued would never see them), how long a record stays locked to the member that acquired
it, and how many deliveries a record gets. They are set once per start with
``IncrementalAlterConfigs`` on the group (which needs the ALTER_CONFIGS permission on it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from tenantq.settings import Settings

log = logging.getLogger("tenantq.worker")

#: The broker's record lock when the group does not set one
#: (``group.share.record.lock.duration.ms``).
BROKER_DEFAULT_LOCK_SECONDS = 30.0


@dataclass(frozen=True)
class ShareGroupOptions:
    """What the worker asks of its share group. None leaves the broker's default."""

    #: How long a record stays acquired by one member before the broker hands it to another
    #: (``share.record.lock.duration.ms``; the broker bounds it, 15-60 s by default).
    lock_seconds: float | None = None
    #: Deliveries of one record before the broker archives it
    #: (``share.delivery.count.limit``; 5 by default, 2-10).
    delivery_limit: int | None = None
    #: Records one poll acquires at most (``max.poll.records``; a soft bound in librdkafka).
    max_poll_records: int | None = None

    @property
    def lock(self) -> float:
        """The lock the group runs with (the broker's default when not set here)."""
        return self.lock_seconds if self.lock_seconds is not None else BROKER_DEFAULT_LOCK_SECONDS


def share_group(prefix: str, queues: list[str]) -> str:
    """The share group of a worker of ``queues`` (not the consumer group's id: a group id
    names one kind of group on the broker)."""
    return f"{prefix}.{'+'.join(sorted(queues))}.share-workers"


def share_consumer_config(
    settings: Settings, group_id: str, worker_id: str, max_poll_records: int
) -> dict[str, Any]:
    """The user's librdkafka keys, then what the worker needs: explicit acknowledgements, so
    a record is accepted only behind its job's durable state."""
    return settings.kafka_client_config(
        **{
            "group.id": group_id,
            "client.id": f"tenantq-{worker_id}",
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": max_poll_records,
        }
    )


def group_configs(options: ShareGroupOptions) -> dict[str, str]:
    """The share group's broker-side configuration."""
    configs = {"share.auto.offset.reset": "earliest"}
    if options.lock_seconds is not None:
        configs["share.record.lock.duration.ms"] = str(int(options.lock_seconds * 1000))
    if options.delivery_limit is not None:
        configs["share.delivery.count.limit"] = str(options.delivery_limit)
    return configs


def configure_share_group(
    settings: Settings, group_id: str, options: ShareGroupOptions, timeout: float = 30.0
) -> None:
    """Set the group's configuration on the broker (idempotent: every member does it as it
    starts, before it first fetches). Raises ``KafkaException`` when the broker refuses."""
    admin = AdminClient(settings.kafka_client_config(**{"client.id": "tenantq-share-admin"}))
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in group_configs(options).items()
    ]
    resource = ConfigResource(ConfigResource.Type.GROUP, group_id, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout)
    log.info("share group %s configured: %s", group_id, group_configs(options))


__all__ = [
    "KafkaException",
    "ShareGroupOptions",
    "configure_share_group",
    "share_consumer_config",
    "share_group",
]
