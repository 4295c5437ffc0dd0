"""The producer's part of the hot-partition flood, without workers: how long the cold tenants'
batches wait from hand-over to Kafka's acknowledgement while one tenant floods, with the flood
sent through the same ``tenantq.Producer`` (``single``, as one service enqueues for all its
tenants) or through one of its own (``separate``, as ``hot_partition.py`` does by default).

    .venv/bin/python loadtest/hot_partition_producers.py --rounds 3     # alternates the modes

If the cold batches wait much longer with one producer than with two, the client (its
partition queues, its one connection to each broker) is what the flood costs the cold tenants
in ``hot_partition.py --single-producer``; if not, look elsewhere (the broker, the workers).
Each round: a topic prefix of its own (removed at the end), a queue of 12 partitions, 50 cold
tenants at ``--cold-rate`` jobs/s in all and one tenant at ``--hot-rate``, paced every 10 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from typing import Any

import tenantq
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.settings import QueueSettings, Settings, load_settings
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics

QUEUE = "flood"
JOB_TYPE = "work"
TICK_SECONDS = 0.01
COLD_TENANTS = [f"cold-{index:02d}" for index in range(50)]


def pace(
    producer: Producer,
    rate: float,
    tenants: list[str],
    stop: threading.Event,
    waits: list[float] | None,
) -> None:
    """``enqueue_batch`` of the jobs due each tick; with ``waits``, each batch's hand-over to
    acknowledgement is noted there."""
    started = time.monotonic()
    sent = 0
    tick = started
    while not stop.is_set():
        due = int(rate * (time.monotonic() - started))
        if due > sent:
            requests = [
                EnqueueRequest(JOB_TYPE, tenants[index % len(tenants)], {}, queue=QUEUE)
                for index in range(sent, due)
            ]
            handed = time.monotonic()
            batch = producer.enqueue_batch(requests)
            if waits is not None:
                batch.add_done_callback(lambda _, at=handed: waits.append(time.monotonic() - at))
            sent = due
        tick += TICK_SECONDS
        time.sleep(max(0.0, tick - time.monotonic()))


def one_round(base: Settings, mode: str, seconds: float, cold: float, hot: float) -> list[float]:
    """The cold batches' waits (seconds) of one round in ``mode``."""
    settings = base.model_copy(
        update={
            "topic_prefix": f"hpp{uuid.uuid4().hex[:8]}",
            "queues": {QUEUE: QueueSettings(partitions=12)},
            "kafka_config": {**base.kafka_config, "log_level": "4"},
        }
    )
    ensure_topics(settings)
    app = tenantq.App(settings)

    @app.job(JOB_TYPE, queue=QUEUE)
    def work(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        """Never run: no worker reads these topics."""

    cold_producer = Producer(settings, app)
    hot_producer = cold_producer if mode == "single" else Producer(settings, app)
    waits: list[float] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=pace, args=(cold_producer, cold, COLD_TENANTS, stop, waits)),
        threading.Thread(target=pace, args=(hot_producer, hot, ["whale"], stop, None)),
    ]
    try:
        for thread in threads:
            thread.start()
        time.sleep(seconds)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        cold_producer.close(60)
        if hot_producer is not cold_producer:
            hot_producer.close(60)
        delete_topics(settings, [spec.name for spec in declared_topics(settings)], timeout=30)
    return sorted(waits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode, alternated")
    parser.add_argument("--seconds", type=float, default=10.0, help="each round's length")
    parser.add_argument("--cold-rate", type=float, default=50.0, help="jobs/s, all cold tenants")
    parser.add_argument("--hot-rate", type=float, default=5000.0, help="jobs/s, the flood")
    arguments = parser.parse_args(argv)
    base = load_settings()
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    for round_number in range(1, arguments.rounds + 1):
        for mode in ("separate", "single"):
            waits = one_round(
                base, mode, arguments.seconds, arguments.cold_rate, arguments.hot_rate
            )
            if not waits:
                print(f"round {round_number} {mode}: no cold batch acknowledged", flush=True)
                continue

            def at(share: float, found: list[float] = waits) -> str:
                return f"{found[min(len(found) - 1, int(share * len(found)))] * 1000:.1f} ms"

            print(
                f"round {round_number} {mode:8}: {len(waits)} cold batches, hand-over to "
                f"acknowledgement p50 {at(0.5)}, p90 {at(0.9)}, p99 {at(0.99)}, "
                f"max {waits[-1] * 1000:.1f} ms",
                flush=True,
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
