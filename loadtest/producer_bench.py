"""Producer SDK throughput against raw confluent-kafka ``produce`` of the same bytes.

Runs against the dev stack (or the TENANTQ_* servers): creates a bench queue under a fresh
topic prefix, then alternates runs of

* raw: ``confluent_kafka.Producer.produce`` of pre-encoded envelopes (same topic, partition,
  key, headers and producer configuration) with a minimal delivery callback, then ``flush``;
* sdk: ``tenantq.Producer.enqueue_many`` of the equivalent requests (validation, UUIDv7,
  JSON, Avro envelope, placement, futures) until every future is resolved;

and prints messages per second of each and their ratio. ``--profile`` runs the SDK once more
under cProfile and prints where the time goes.

    python loadtest/producer_bench.py --messages 200000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import pstats
import sys
import time
import uuid
from concurrent.futures import Future, wait
from typing import Any

import confluent_kafka
import tenantq
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.config import producer_config
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.settings import QueueSettings
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics

QUEUE = "bench"
TENANTS = 200


def requests_for(count: int) -> list[EnqueueRequest]:
    # ~100 bytes of JSON per payload.
    note = "x" * 64
    return [
        EnqueueRequest("bench_job", f"tenant-{index % TENANTS}", {"user": index, "note": note})
        for index in range(count)
    ]


def run_sdk(settings: tenantq.Settings, requests: list[EnqueueRequest], chunk: int) -> float:
    # No placement table: the bench measures the producer, not a database round trip.
    with Producer(settings, placement_book=PlacementBook(None, 60.0)) as producer:
        producer.enqueue("bench_job", tenant="warm-up", payload={}, queue=QUEUE).result(30)
        started = time.perf_counter()
        futures: list[Future[JobRef]] = []
        for start in range(0, len(requests), chunk):
            futures.extend(producer.enqueue_many(requests[start : start + chunk]))
        # flush() returns once every delivery report has been served, i.e. every future is
        # resolved; checking them is left out of the clock, as the raw run checks nothing.
        remaining = producer.flush(120)
        elapsed = time.perf_counter() - started
        done, pending = wait(futures, timeout=120)
        failed = sum(1 for future in done if future.exception() is not None) + remaining
        if pending or failed:
            raise SystemExit(f"sdk run: {len(pending)} pending, {failed} failed")
    return len(requests) / elapsed


def run_raw(settings: tenantq.Settings, requests: list[EnqueueRequest]) -> float:
    # The exact messages the SDK would publish, encoded before the clock starts.
    with Producer(settings, placement_book=PlacementBook(None, 60.0)) as encoder:
        messages = encoder._preparer.prepare_all(requests, dt.datetime.now(dt.UTC))
    client = confluent_kafka.Producer(producer_config(settings, {}))
    errors = 0

    def on_delivery(error: Any, message: Any) -> None:
        nonlocal errors
        if error is not None:
            errors += 1

    client.produce(messages[0].topic, b"warm-up", partition=0)
    client.flush(30)
    started = time.perf_counter()
    produce = client.produce
    for message in messages:
        while True:
            try:
                produce(
                    message.topic,
                    message.value,
                    message.key,
                    partition=message.partition,
                    on_delivery=on_delivery,
                    headers=message.headers,
                )
                break
            except BufferError:
                client.poll(0.05)
    remaining = client.flush(120)
    elapsed = time.perf_counter() - started
    if remaining or errors:
        raise SystemExit(f"raw run: {remaining} undelivered, {errors} failed")
    return len(messages) / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2, help="alternating raw/sdk rounds")
    parser.add_argument("--chunk", type=int, default=10_000, help="requests per enqueue_many")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--profile", action="store_true", help="profile one more SDK run")
    parser.add_argument("--keep-topics", action="store_true")
    parser.add_argument(
        "--tune-gc",
        action="store_true",
        help="freeze the prepared inputs out of the cyclic GC and raise its gen-0 threshold, "
        "as a high-rate producer process may (shows how much of the SDK cost is GC)",
    )
    arguments = parser.parse_args(argv)

    base = tenantq.load_settings()
    settings = base.model_copy(
        update={
            "topic_prefix": f"bench{uuid.uuid4().hex[:8]}",
            "queues": {QUEUE: QueueSettings(partitions=arguments.partitions)},
            "metrics_port": 0,
        }
    )
    ensure_topics(settings)
    requests = [
        EnqueueRequest(r.job_type, r.tenant, r.payload, queue=QUEUE)
        for r in requests_for(arguments.messages)
    ]
    if arguments.tune_gc:
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    print(
        f"{arguments.messages} messages of ~100 B payload to {settings.topic_prefix}.{QUEUE} "
        f"({arguments.partitions} partitions) on {settings.kafka_bootstrap_servers}"
    )
    raw_rates, sdk_rates = [], []
    try:
        for round_number in range(arguments.rounds):
            raw_rates.append(run_raw(settings, requests))
            sdk_rates.append(run_sdk(settings, requests, arguments.chunk))
            print(
                f"round {round_number + 1}: raw {raw_rates[-1]:,.0f} msg/s, "
                f"sdk {sdk_rates[-1]:,.0f} msg/s"
            )
        raw, sdk = max(raw_rates), max(sdk_rates)
        print(f"best: raw {raw:,.0f} msg/s, sdk {sdk:,.0f} msg/s, sdk/raw = {sdk / raw:.2f}")
        if arguments.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            run_sdk(settings, requests, arguments.chunk)
            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.stdout)
            stats.sort_stats("tottime").print_stats(20)
    finally:
        if not arguments.keep_topics:
            delete_topics(settings, [spec.name for spec in declared_topics(settings)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
