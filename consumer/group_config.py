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


#: The classic protocol's session: a member that stops heartbeating is out after this long.
CLASSIC_SESSION_TIMEOUT_MS = 10000


def consumer_config(settings: Settings, group_id: str, worker_id: str) -> dict[str, Any]:
    """Defaults first, then the user's librdkafka keys, then what correctness needs."""
    config: dict[str, Any] = {
        "max.poll.interval.ms": 300000,
        "auto.commit.interval.ms": 1000,
        "fetch.max.bytes": 16 * 1024 * 1024,
        # A retry-tier partition resumed at its due time joins the next fetch request; a
        # long fetch wait (500 ms by default) would make every retry that much late.
        "fetch.wait.max.ms": 50,
        # One fetch response carries at most this much of each partition: a flooded partition
        # (a hot lane's) does not fill a response, and the consumer's single queue, with
        # megabytes that the window pauses and drops, while the other tenants' messages wait
        # for the next fetch. 64 KiB is still hundreds of messages per partition and fetch.
        "max.partition.fetch.bytes": 64 * 1024,
        # librdkafka fetches ahead until it holds queued.min.messages of a partition (100,000
        # by default), and pausing the partition, which the worker does whenever its
        # read-ahead window is full, drops all it held; resumed, it fetches them again. Over
        # a backlog, those fetches again are most of what the broker sends, and they cost the
        # member time per job as well: no more is fetched ahead than the window. Above the mark a
        # partition's next fetch waits fetch.queue.backoff.ms (1 s by default): a few ms
        # keeps the queue from running dry between polls.
        "queued.min.messages": settings.worker.read_ahead_per_partition,
        "fetch.queue.backoff.ms": 5,
        "auto.offset.reset": "earliest",
    }
    protocol = settings.worker.group_protocol
    if protocol == "classic":
        # A session no longer than the poll interval the user chose: librdkafka refuses to
        # make a consumer whose max.poll.interval.ms is below its session.timeout.ms.
        poll_interval = int(settings.kafka_config.get("max.poll.interval.ms", 300000))
        session = min(CLASSIC_SESSION_TIMEOUT_MS, poll_interval)
        config.update(
            {"session.timeout.ms": session, "heartbeat.interval.ms": min(1000, session // 3)}
        )
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
    required = {
        "group.id": group_id,
        "client.id": f"tenantq-{worker_id}",
        "enable.auto.commit": True,
        # Offsets are stored by hand, only behind durable job state.
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }
    overridden = sorted(key for key in required if key in settings.kafka_config)
    if overridden:
        log.warning(
            "ignoring %s in kafka_config: the worker sets them itself (offsets are stored only "
            "behind durable job state)",
            ", ".join(overridden),
        )
    # One mapping: a key both in the user's config and in ``required`` is no longer passed
    # twice (a TypeError that stopped the worker at start).
    return settings.kafka_client_config(**{**config, **group, **required})
