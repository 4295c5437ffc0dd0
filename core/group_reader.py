"""A consumer of a group that never subscribes: how tenantq reads what a consumer group has
committed without joining it.

``committed()`` and ``get_watermark_offsets()`` on such a consumer ask the group's
coordinator and the partitions' leaders directly; with no subscription there is no join, so
the reader never triggers a rebalance of the workers, and with auto-commit and the offset
store off it never commits for them. The admin client's ``list_consumer_group_offsets``
is not used for this: in librdkafka 2.16 a broker that restarts while that request is in
flight can abort the process (``tenantq.observability.consumer_lag``).
"""

from __future__ import annotations

from confluent_kafka import Consumer

from tenantq.settings import Settings


def group_reader(settings: Settings, group: str, client_id: str) -> Consumer:
    """A consumer of ``group`` for reading its committed offsets; close it when done."""
    return Consumer(
        settings.kafka_client_config(
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "client.id": client_id,
            }
        )
    )
