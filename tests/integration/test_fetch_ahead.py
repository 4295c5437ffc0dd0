"""A worker's consumer fetches little more of a partition than its read-ahead window.

The worker pauses a partition whenever that window is full, and librdkafka drops what it had
fetched of a paused partition, to fetch it again on resume. Before, the consumer held up to
100,000 messages of each partition (librdkafka's default ``queued.min.messages``): over a
backlog, most of what the broker sent was sent twice or more. Checked here on the real broker
through librdkafka's own statistics of the partition's fetch queue."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

import tenantq
from tenantq.consumer.group_config import consumer_config
from tenantq.topics import main_topic

BACKLOG = 30_000


def _fetched_ahead(settings: tenantq.Settings) -> int:
    """Messages of partition 0 in the consumer's fetch queue, once fetching has settled, after
    one message was taken from a backlog of ``BACKLOG``."""
    topic = main_topic(settings.topic_prefix, "default")
    # Record batches of 16 KiB: a fetch returns whole batches, so one batch larger than a
    # fetch's share of the partition would come whole past the mark.
    producer = Producer(settings.kafka_client_config(**{"linger.ms": 20, "batch.size": 16384}))
    body = b"x" * 200
    for index in range(BACKLOG):
        while True:
            try:
                producer.produce(topic, body, b"k%d" % index, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0

    reports: list[dict[str, Any]] = []
    config = consumer_config(settings, f"{settings.topic_prefix}-fetch-ahead", "fetch-ahead")
    config |= {
        "statistics.interval.ms": 200,
        "stats_cb": lambda text: reports.append(json.loads(text)),
    }
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = consumer.consume(num_messages=1, timeout=20)
        assert len(first) == 1 and first[0].error() is None
        # The fetcher runs on its own threads: give it time to fetch all it would.
        time.sleep(2.0)
        consumer.consume(num_messages=1, timeout=1)  # serves the statistics callbacks
        # Taken before closing: the consumer's last report, at close, finds the queue gone.
        settled = [
            partitions["0"]["fetchq_cnt"]
            for report in reports
            if "0" in (partitions := report["topics"].get(topic, {}).get("partitions", {}))
        ]
    finally:
        consumer.close()
    assert settled, "no statistics from librdkafka"
    return max(settled)


def test_the_consumer_holds_about_one_window_of_a_partition_not_its_backlog(
    settings: tenantq.Settings,
) -> None:
    window = settings.worker.read_ahead_per_partition
    fetched = _fetched_ahead(settings)
    # The window, plus what the fetches in flight bring past it (64 KiB of a partition each).
    assert 0 < fetched <= window + 1_000, fetched
    assert fetched < BACKLOG // 4
