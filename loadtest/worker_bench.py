"""Worker throughput end to end against a raw confluent-kafka consumer of the same topic.

Runs against the dev stack (or the TENANTQ_* servers) under a fresh topic prefix:

* worker: ``--jobs`` no-op jobs are enqueued with the SDK, then an in-process
  ``tenantq.Worker`` claims, runs, completes and commits them (the full Postgres bookkeeping:
  claim batch, complete batch, attempts rows, offsets stored behind durable state). Throughput
  is jobs from the first handler start until Postgres says every job succeeded. Then, with the
  worker still running, ``--latency-jobs`` more are enqueued at ``--rate`` jobs/s (default:
  half the measured throughput) to measure enqueue-to-start latency at a sustainable load;
  each payload carries its enqueue time, each handler records its start time.
* raw: a ``confluent_kafka.Consumer`` in a fresh group reads the same topic from the start,
  no decoding, no database: the ceiling the worker is measured against.

``--profile`` runs the worker once more on a fresh backlog under cProfile (the poll-loop
thread: claim, dispatch, results, offsets) and prints the top functions by cumulative time.

    python loadtest/worker_bench.py --jobs 20000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
import uuid
from concurrent.futures import Future, wait

import confluent_kafka
import tenantq
from bench_topics import bench_settings
from pydantic import BaseModel
from tenantq.consumer.worker import Worker
from tenantq.job_ids import new_job_id
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.store.engine import connect
from tenantq.store.job_sets import job_set_state_counts

QUEUE = "bench"
TENANTS = 200


class Noop(BaseModel):
    enqueued_at: float


APP = tenantq.App()
#: Seconds from enqueue to handler start, per job, in the order handlers started.
STARTS: list[tuple[float, float]] = []


@APP.job("noop", queue=QUEUE)
def noop(ctx: object, payload: Noop) -> None:
    now = time.time()
    STARTS.append((now, now - payload.enqueued_at))  # list.append is atomic under the GIL


def enqueue(settings: tenantq.Settings, count: int, rate: float | None = None) -> list[uuid.UUID]:
    """Publish ``count`` no-op jobs (at ``rate`` jobs/s, or as fast as possible)."""
    job_ids = [new_job_id() for _ in range(count)]
    chunk = 1000 if rate is None else max(1, int(rate / 50))
    # No placement table: the bench measures the worker, not a producer's database lookup.
    with Producer(settings, APP, placement_book=PlacementBook(None, 60.0)) as producer:
        started = time.monotonic()
        futures: list[Future[JobRef]] = []
        for start in range(0, count, chunk):
            now = time.time()
            futures += producer.enqueue_many(
                EnqueueRequest("noop", f"tenant-{i % TENANTS}", {"enqueued_at": now}, job_id=i_id)
                for i, i_id in enumerate(job_ids[start : start + chunk], start)
            )
            if rate is not None:
                pause = started + (start + chunk) / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
        done, pending = wait(futures, timeout=120)
        if pending or any(future.exception() for future in done):
            raise SystemExit("enqueue failed")
    return job_ids


def wait_succeeded(settings: tenantq.Settings, job_ids: list[uuid.UUID], timeout: float) -> float:
    """Block until Postgres says every job succeeded; returns that moment (time.time())."""
    deadline = time.monotonic() + timeout
    with connect(settings, autocommit=True, application_name="worker-bench") as connection:
        while time.monotonic() < deadline:
            counts = job_set_state_counts(connection, job_ids)
            if counts.by_state.get("succeeded", 0) == len(job_ids):
                return time.time()
            time.sleep(0.05)
    raise SystemExit(f"jobs not all succeeded after {timeout:.0f}s: {counts.by_state}")


def run_worker(
    settings: tenantq.Settings,
    backlog: list[uuid.UUID],
    concurrency: int,
    latency_jobs: int,
    rate: float | None,
    profiler: cProfile.Profile | None = None,
) -> tuple[float, list[float]]:
    """Drain ``backlog`` with a worker in this thread; returns (jobs/s, latencies)."""
    STARTS.clear()
    worker = Worker(
        APP, [QUEUE], settings=settings, concurrency=concurrency, install_signal_handlers=False
    )
    throughput = 0.0
    latencies: list[float] = []
    errors: list[BaseException] = []

    def drive() -> None:
        nonlocal throughput
        try:
            finished = wait_succeeded(settings, backlog, 600)
            first = min(at for at, _ in STARTS[: len(backlog)])
            throughput = len(backlog) / (finished - first)
            if latency_jobs:
                STARTS.clear()
                extra = enqueue(settings, latency_jobs, rate or throughput / 2)
                wait_succeeded(settings, extra, 600)
            latencies.extend(latency for _, latency in STARTS)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            worker.stop()

    threading.Thread(target=drive, name="bench-driver", daemon=True).start()
    if profiler is not None:
        profiler.runcall(worker.run)
    else:
        worker.run()
    if errors:
        raise SystemExit(f"worker run failed: {errors[0]!r}")
    return throughput, latencies


def run_raw(settings: tenantq.Settings, topic: str, count: int) -> float:
    """Messages per second of a bare consumer reading ``count`` messages of ``topic``."""
    consumer = confluent_kafka.Consumer(
        settings.kafka_client_config(
            **{
                "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "fetch.max.bytes": 16 * 1024 * 1024,
            }
        )
    )
    consumer.subscribe([topic])
    seen, first = 0, None
    deadline = time.monotonic() + 300
    try:
        while seen < count and time.monotonic() < deadline:
            messages = consumer.consume(num_messages=500, timeout=0.5)
            if messages and first is None:
                first = time.perf_counter()
            seen += sum(1 for message in messages if message.error() is None)
        elapsed = time.perf_counter() - (first or time.perf_counter())
    finally:
        consumer.close()
    if seen < count:
        raise SystemExit(f"raw run: read {seen} of {count}")
    return count / elapsed


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def measure(settings: tenantq.Settings, arguments: argparse.Namespace) -> None:
    """Worker and raw consumer throughput, latency at a sustainable rate, the profile."""
    topic = f"{settings.topic_prefix}.{QUEUE}"
    print(
        f"{arguments.jobs} no-op jobs on {topic} ({arguments.partitions} partitions), "
        f"worker concurrency {arguments.concurrency}, on {settings.kafka_bootstrap_servers}"
    )
    backlog = enqueue(settings, arguments.jobs)
    worker_rate, latencies = run_worker(
        settings, backlog, arguments.concurrency, arguments.latency_jobs, arguments.rate
    )
    raw_rate = run_raw(settings, topic, arguments.jobs)
    print(
        f"worker {worker_rate:,.0f} jobs/s, raw consumer {raw_rate:,.0f} msg/s, "
        f"worker/raw = {worker_rate / raw_rate:.3f}"
    )
    if latencies:
        rate = arguments.rate or worker_rate / 2
        print(
            f"enqueue-to-start at {rate:,.0f} jobs/s ({len(latencies)} jobs): "
            f"p50 {percentile(latencies, 0.5) * 1000:,.1f} ms, "
            f"p99 {percentile(latencies, 0.99) * 1000:,.1f} ms"
        )
    if arguments.profile:
        profiler = cProfile.Profile()
        run_worker(
            settings,
            enqueue(settings, arguments.jobs),
            arguments.concurrency,
            0,
            None,
            profiler,
        )
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-jobs", type=int, default=3_000)
    parser.add_argument("--rate", type=float, default=None, help="latency phase jobs/s")
    parser.add_argument("--profile", action="store_true", help="profile one more worker run")
    parser.add_argument("--keep-topics", action="store_true")
    arguments = parser.parse_args(argv)

    with bench_settings(
        "wbench",
        QUEUE,
        arguments.partitions,
        keep_topics=arguments.keep_topics,
        log_level="WARNING",
    ) as settings:
        measure(settings, arguments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
