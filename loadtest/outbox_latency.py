"""Enqueue-to-start latency through the outbox (default relay settings) against the producer.

Runs against the dev stack (or the TENANTQ_* servers) under a fresh topic prefix: one
in-process ``tenantq.Worker`` serves a queue, an outbox relay (``RelayService``, default
``TENANTQ_OUTBOX__*``) runs beside it as in every ``tenantq worker``. Then ``--jobs`` no-op
jobs are enqueued at ``--rate`` jobs/s through ``Producer.enqueue_many`` (chunks of 1/50 s),
and the same number through ``Outbox.enqueue``, one committed transaction per job (the way
an application writes an order and its receipt). Each payload carries the time just before
its enqueue; each handler records when it started. Prints p50 / p90 / p99 / max per path.

    python loadtest/outbox_latency.py --jobs 2000 --rate 200
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

import psycopg
from bench_run import percentile
from bench_topics import bench_settings
from pydantic import BaseModel

import tenantq
from tenantq.consumer.worker import Worker
from tenantq.outbox.relay import RelayService
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.store.engine import psycopg_url

QUEUE = "olat"
TENANTS = 50


class Stamp(BaseModel):
    enqueued_at: float
    path: str


APP = tenantq.App()
#: Seconds from enqueue to handler start, by path.
LATENCIES: dict[str, list[float]] = {"producer": [], "outbox": []}


@APP.job("stamp", queue=QUEUE)
def stamp(ctx: object, payload: Stamp) -> None:
    LATENCIES[payload.path].append(time.time() - payload.enqueued_at)


def through_producer(settings: tenantq.Settings, count: int, rate: float) -> None:
    chunk = max(1, int(rate / 50))
    with Producer(settings, APP, placement_book=PlacementBook(None, 60.0)) as producer:
        started = time.monotonic()
        for start in range(0, count, chunk):
            now = time.time()
            producer.enqueue_many(
                EnqueueRequest("stamp", f"t{i % TENANTS}", {"enqueued_at": now, "path": "producer"})
                for i in range(start, min(count, start + chunk))
            )
            pause = started + (start + chunk) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        producer.flush(60)


def through_outbox(settings: tenantq.Settings, count: int, rate: float) -> None:
    with (
        tenantq.Outbox(APP, settings=settings) as outbox,
        psycopg.connect(psycopg_url(settings.require_database_url())) as connection,
    ):
        started = time.monotonic()
        for i in range(count):
            payload = {"enqueued_at": time.time(), "path": "outbox"}
            outbox.enqueue(connection, "stamp", tenant=f"t{i % TENANTS}", payload=payload)
            connection.commit()
            pause = started + (i + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)


def wait_for(count: int, path: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(LATENCIES[path]) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{path}: only {len(LATENCIES[path])} of {count} started")
        time.sleep(0.05)


def report(path: str) -> str:
    values = LATENCIES[path]
    parts = [f"{name} {percentile(values, q) * 1000:7.1f} ms" for name, q in
             (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))]  # fmt: skip
    return (
        f"{path:9s} {len(values):6d} jobs  "
        + "  ".join(parts)
        + f"  max {max(values) * 1000:7.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000, help="jobs per path")
    parser.add_argument("--rate", type=float, default=200.0, help="jobs/s per path")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--keep-topics", action="store_true")
    arguments = parser.parse_args(argv)
    with bench_settings(
        "olat", QUEUE, arguments.partitions, keep_topics=arguments.keep_topics
    ) as settings:
        worker = Worker(APP, [QUEUE], settings=settings, install_signal_handlers=False)
        relay = RelayService(settings, [QUEUE])
        errors: list[Any] = []

        def drive() -> None:
            try:
                time.sleep(3.0)  # the worker joins its group
                for path, enqueue in (("producer", through_producer), ("outbox", through_outbox)):
                    enqueue(settings, arguments.jobs, arguments.rate)
                    wait_for(arguments.jobs, path)
            except BaseException as error:
                errors.append(error)
            finally:
                worker.stop()

        relay.start()
        threading.Thread(target=drive, name="bench-driver", daemon=True).start()
        worker.run()
        relay.stop(10)
        if errors:
            raise SystemExit(f"bench failed: {errors[0]!r}")
    print(f"enqueue -> handler start, {arguments.jobs} jobs per path at {arguments.rate:g} jobs/s,"
          f" relay poll {settings.outbox.poll_interval_seconds:g}s")  # fmt: skip
    print(report("producer"))
    print(report("outbox"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
