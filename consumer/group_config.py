"""The librdkafka configuration of a worker's consumer-group member."""

from __future__ import annotations

import logging
from typing import Any

from tenantq.settings import Settings

log = logging.getLogger("tenantq.worker")


#: Client-side group settings that the KIP-848 protocol moves to the broker (and refuses).
CLASSIC_ONLY_KEYS = (
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
)


def consumer_config(settings: Settings, group_id: str, worker_id: str) -> dict[str, Any]:
    """Defaults first, then the user's librdkafka keys, then what correctness needs."""
    config: dict[str, Any] = {
        "max.poll.interval.ms": 300000,
        "auto.commit.interval.ms": 1000,
        "fetch.max.bytes": 16 * 1024 * 1024,
        # A retry-tier partition resumed at its due time joins the next fetch request; a
        # long fetch wait (500 ms by default) would make every retry that much late.
        "fetch.wait.max.ms": 50,
        "auto.offset.reset": "earliest",
    }
    protocol = settings.worker.group_protocol
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    config.update(settings.kafka_config)
    if protocol == "consumer":
        dropped = [key for key in CLASSIC_ONLY_KEYS if config.pop(key, None) is not None]
        if dropped:
            log.warning(
                "ignoring %s: the consumer group protocol sets them on the broker "
                "(group.consumer.* configs)",
                ", ".join(dropped),
            )
        group = {
            "group.protocol": "consumer",
            "group.remote.assignor": settings.worker.group_remote_assignor,
        }
    else:
        group = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"}
    return settings.kafka_client_config(
        **config,
        **group,
        **{
            "group.id": group_id,
            "client.id": f"tenantq-{worker_id}",
            "enable.auto.commit": True,
            # Offsets are stored by hand, only behind durable job state.
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        },
    )
