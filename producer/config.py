"""The librdkafka configuration of tenantq's producer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantq.settings import Settings

#: Bytes of room above ``max_message_bytes`` for headers and record overhead.
MESSAGE_OVERHEAD_BYTES = 64 * 1024


def producer_config(settings: Settings, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """tenantq's defaults, then ``settings.kafka_config``, then ``overrides``.

    Override keys may use underscores for dots (``linger_ms=10`` means ``linger.ms``), so they
    can be passed as Python keyword arguments.
    """
    producer = settings.producer
    config: dict[str, Any] = {
        # Idempotence keeps retries from duplicating or reordering within a partition.
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": producer.linger_ms,
        "batch.size": producer.batch_size,
        "compression.type": producer.compression,
        "message.max.bytes": settings.max_message_bytes + MESSAGE_OVERHEAD_BYTES,
        "client.id": "tenantq-producer",
    }
    config.update(settings.kafka_client_config())
    config.update({key.replace("_", "."): value for key, value in overrides.items()})
    return config
