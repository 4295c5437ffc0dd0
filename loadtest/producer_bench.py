"""Producer SDK throughput against raw confluent-kafka ``produce`` of the same bytes.

Runs against the dev stack (or the TENANTQ_* servers): creates a bench queue under a fresh
topic prefix, then alternates runs of

* raw: ``confluent_kafka.Producer.produce`` of pre-encoded envelopes (same topic, partition,
  key, headers and producer configuration) with a minimal delivery callback, then ``flush``
  (``--raw-positional`` adds a run passing ``produce`` its arguments positionally, as the
  SDK does: confluent-kafka parses them faster);
* many: ``tenantq.Producer.enqueue_many`` of the equivalent requests (validation, UUIDv7,
  JSON, Avro envelope, placement, one future per job, read once all are resolved;
  ``--eager`` adds a run reading them as each call returns) until every job is settled;
* batch: ``tenantq.Producer.enqueue_batch`` of the same requests (same work, one future per
  call) until every batch is resolved;

and prints messages per second of each and their ratios to raw, all measured in the same
rounds (the machine may be noisy: compare ratios, not absolute rates across runs), then each
path's ratio over the rounds (min, median, max) and the median ratio of CPU per job.
``--tracing`` adds each SDK run with OpenTelemetry tracing on (one span per call, exported
as OTLP/HTTP to a stand-in collector in this process, ``otlp_sink``), and ``enqueue`` of one
job per call (``--single`` jobs) untraced and traced, and prints what tracing adds per job.
``--profile`` runs each SDK path once more under cProfile, with the cyclic GC timed through
``gc.callbacks``, and prints where the time of a job goes.

    python loadtest/producer_bench.py --messages 200000 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import gc
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from typing import Any

import confluent_kafka
import machine_speed
from bench_topics import bench_settings

import tenantq
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.config import producer_config
from tenantq.producer.producer import BatchFuture, EnqueueRequest, JobRef, Producer

QUEUE = "bench"
TENANTS = 200
#: The CPU seconds per job of each run, in order (this process's, every thread: the SDK's,
#: librdkafka's and the exporter's), steadier on a shared machine than the rate.
CPU_PER_JOB: list[float] = []


def requests_for(count: int) -> list[EnqueueRequest]:
    # ~100 bytes of JSON per payload.
    note = "x" * 64
    return [
        EnqueueRequest("bench_job", f"tenant-{index % TENANTS}", {"user": index, "note": note})
        for index in range(count)
    ]


@contextlib.contextmanager
def clocked(
    settings: tenantq.Settings,
    requests: list[EnqueueRequest],
    submit: Callable[[Producer], object],
    finish: Callable[[], object],
) -> Iterator[tuple[float, int]]:
    """A producer warmed up by one job, then on the clock: ``submit(producer)`` (all of
    ``requests``), ``flush`` and ``finish``; yields the seconds taken and the messages still
    pending, with the producer still open, and records the CPU per job."""
    # No placement table: the bench measures the producer, not a database round trip.
    with Producer(settings, placement_book=PlacementBook(None, 60.0)) as producer:
        producer.enqueue("bench_job", tenant="warm-up", payload={}, queue=QUEUE).result(30)
        started = time.perf_counter()
        cpu_started = time.process_time()
        submit(producer)
        # flush() returns once every delivery report has been served, i.e. every future is
        # resolved; checking them is left out of the clock, as the raw run checks nothing.
        remaining = producer.flush(120)
        finish()
        elapsed = time.perf_counter() - started
        CPU_PER_JOB.append((time.process_time() - cpu_started) / len(requests))
        yield elapsed, remaining


def run_sdk(
    settings: tenantq.Settings,
    requests: list[EnqueueRequest],
    chunk: int,
    finish: Callable[[], object] = lambda: None,
    eager: bool = False,
) -> float:
    """``enqueue_many``: one future per job (``chunk`` per call; 1: ``enqueue``'s cost),
    read once every job is acknowledged, outside the clock (``JobFutures`` makes a job's
    future when it is first read); ``eager``: read as each call returns, inside the clock,
    as code that keeps a list of every future does. ``finish`` runs inside the clock at the
    end (a traced run exports its last spans)."""
    calls: list[Sequence[Future[JobRef]]] = []
    futures: list[Future[JobRef]] = []

    def submit(producer: Producer) -> None:
        for start in range(0, len(requests), chunk):
            call = producer.enqueue_many(requests[start : start + chunk])
            if eager:
                futures.extend(call)
            else:
                calls.append(call)

    with clocked(settings, requests, submit, finish) as (elapsed, remaining):
        if not eager:
            futures = [future for call in calls for future in call]
        done, pending = wait(futures, timeout=120)
        failed = sum(1 for future in done if future.exception() is not None) + remaining
        if pending or failed or len(futures) != len(requests):
            raise SystemExit(
                f"sdk run: {len(pending)} pending, {failed} failed, {len(futures)} futures"
            )
    return len(requests) / elapsed


def run_batch(
    settings: tenantq.Settings,
    requests: list[EnqueueRequest],
    chunk: int,
    finish: Callable[[], object] = lambda: None,
) -> float:
    """``enqueue_batch``: one future per ``chunk`` jobs."""
    batches: list[BatchFuture] = []

    def submit(producer: Producer) -> None:
        for start in range(0, len(requests), chunk):
            batches.append(producer.enqueue_batch(requests[start : start + chunk]))

    with clocked(settings, requests, submit, finish) as (elapsed, remaining):
        # result() raises if any job failed; len() does not make the JobRefs (see JobRefs).
        acknowledged = sum(len(batch.result(120)) for batch in batches)
        if remaining or acknowledged != len(requests):
            raise SystemExit(f"batch run: {remaining} pending, {acknowledged} acknowledged")
    return len(requests) / elapsed


def run_raw(
    settings: tenantq.Settings, requests: list[EnqueueRequest], positional: bool = False
) -> float:
    """Raw ``produce``, with keyword arguments (``positional``: every argument positional,
    as the SDK calls it, which parses them faster)."""
    # The exact messages the SDK would publish, encoded before the clock starts (a list:
    # ``prepare_all`` returns columns whose ``EncodedJob`` rows are made as they are read).
    with Producer(settings, placement_book=PlacementBook(None, 60.0)) as encoder:
        messages = list(encoder._preparer.prepare_all(requests, dt.datetime.now(dt.UTC)))
    client = confluent_kafka.Producer(producer_config(settings, {}))
    errors = 0

    def on_delivery(error: Any, message: Any) -> None:
        nonlocal errors
        if error is not None:
            errors += 1

    client.produce(messages[0].topic, b"warm-up", partition=0)
    client.flush(30)
    started = time.perf_counter()
    cpu_started = time.process_time()
    produce = client.produce
    for message in messages:
        while True:
            try:
                if positional:
                    produce(
                        message.topic,
                        message.value,
                        message.key,
                        message.partition,
                        on_delivery,
                        None,
                        0,
                        message.kafka_headers(),
                    )
                else:
                    produce(
                        message.topic,
                        message.value,
                        message.key,
                        partition=message.partition,
                        on_delivery=on_delivery,
                        headers=message.kafka_headers(),
                    )
                break
            except BufferError:
                client.poll(0.05)
    remaining = client.flush(120)
    elapsed = time.perf_counter() - started
    CPU_PER_JOB.append((time.process_time() - cpu_started) / len(messages))
    if remaining or errors:
        raise SystemExit(f"raw run: {remaining} undelivered, {errors} failed")
    return len(messages) / elapsed


class GcTimer:
    """Wall time spent in the cyclic collector (any thread), through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1


#: Profile rows summed into each bucket of "where the time goes" (substring of the function
#: label, ``path:line(function)``, or of ``file(function)`` -> bucket); the first match wins.
BUCKETS = (
    ("encode_payload", "payload JSON"),
    ("new_job_ids", "job ids (UUIDv7)"),
    ("job_ids.py", "job ids (UUIDv7)"),
    ("uuid.py", "job ids (UUIDv7)"),
    ("envelope_writer.py", "Avro envelope"),
    # prepare_all calls the JSON encoder and writes the envelope inline: their time is here.
    ("request.py", "validation, routing, JSON, envelope"),
    ("validation.py", "validation, routing, JSON, envelope"),
    ("method 'produce'", "confluent-kafka produce"),
    ("batch.py", "delivery callbacks"),
    ("job_futures.py", "delivery callbacks"),
    ("delivery.py", "delivery callbacks"),
    ("job_future.py", "delivery callbacks (futures)"),
    ("_base.py", "delivery callbacks (futures)"),
    ("method 'poll'", "poll/flush wait (librdkafka)"),
    ("method 'flush'", "poll/flush wait (librdkafka)"),
)


def where_the_time_goes(
    label: str, run: Callable[[], float], messages: int, top: int, show_top: bool
) -> None:
    """Profile one run and print per-job microseconds by bucket (self time), GC apart."""
    timer = GcTimer()
    gc.callbacks.append(timer)
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        run()
        profiler.disable()
    finally:
        gc.callbacks.remove(timer)
    stats = pstats.Stats(profiler)
    buckets: dict[str, float] = {}
    total = 0.0
    raw_stats: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, function), (_, _, tottime, _, _) in raw_stats.items():
        name = f"{filename}:{line}({function})"
        short = f"{os.path.basename(filename)}({function})"
        bucket = next(
            (b for pattern, b in BUCKETS if pattern in name or pattern in short), "other Python"
        )
        buckets[bucket] = buckets.get(bucket, 0.0) + tottime
        total += tottime
    per_job = 1e6 / messages
    print(
        f"\n{label}: main thread {total * per_job:.2f} us/job under cProfile "
        f"(profiling inflates Python calls; the delivery callbacks served by the poller "
        f"thread are not in it)"
    )
    for bucket, seconds in sorted(buckets.items(), key=lambda item: -item[1]):
        print(f"  {bucket:<32} {seconds * per_job:6.2f} us/job")
    print(
        f"  {'of which cyclic GC (any thread)':<32} {timer.seconds * per_job:6.2f} us/job "
        f"({timer.collections} collections)"
    )
    if show_top:
        stats.sort_stats("tottime").print_stats(top)


def compare(settings: tenantq.Settings, arguments: argparse.Namespace, sink: Any = None) -> None:
    """The alternating rounds, their best figures and, with ``--profile``, the profiles."""
    requests = [
        EnqueueRequest(r.job_type, r.tenant, r.payload, queue=QUEUE)
        for r in requests_for(arguments.messages)
    ]
    if arguments.tune_gc:
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    print(
        f"{arguments.messages} messages of ~100 B payload to {settings.topic_prefix}.{QUEUE} "
        f"({arguments.partitions} partitions) on {settings.kafka_bootstrap_servers}, "
        f"{arguments.chunk} per call"
    )
    runs: dict[str, Callable[[], float]] = {
        "raw": lambda: run_raw(settings, requests),
        "enqueue_many": lambda: run_sdk(settings, requests, arguments.chunk),
        "enqueue_batch": lambda: run_batch(settings, requests, arguments.chunk),
    }
    if arguments.raw_positional:
        runs["raw_positional"] = lambda: run_raw(settings, requests, positional=True)
    if arguments.eager:
        runs["enqueue_many eager"] = lambda: run_sdk(
            settings, requests, arguments.chunk, eager=True
        )
    if sink is not None:
        runs.update(traced_runs(settings, requests, arguments, sink))
    rates: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for round_number in range(arguments.rounds):
        for name, run in runs.items():
            rates[name].append(run())
            cpu[name].append(CPU_PER_JOB[-1])
        print(
            f"round {round_number + 1}: "
            + ", ".join(f"{name} {rates[name][-1]:,.0f}" for name in runs)
            + " msg/s; "
            + ", ".join(
                f"{name}/raw {rates[name][-1] / rates['raw'][-1]:.2f}"
                for name in runs
                if name != "raw"
            )
        )
    print(
        "\nratio to raw, each round against its own raw run (min / median / max), and the "
        "median of raw's CPU per job over its own (steadier on a shared machine):"
    )
    for name in [name for name in runs if name != "raw"]:
        ratios = [rate / raw for rate, raw in zip(rates[name], rates["raw"], strict=True)]
        cpu_ratios = [raw / own for own, raw in zip(cpu[name], cpu["raw"], strict=True)]
        print(
            f"  {name:<20} {min(ratios):.2f} / {statistics.median(ratios):.2f} / "
            f"{max(ratios):.2f}   CPU {statistics.median(cpu_ratios):.2f}"
        )
    best = {name: max(values) for name, values in rates.items()}
    least_cpu = {name: min(values) for name, values in cpu.items()}
    print("\nbest of each (msg/s, us/msg, ratio to raw; least CPU us/msg of the process):")
    for name, rate in best.items():
        print(
            f"  {name:<20} {rate:>10,.0f} {1e6 / rate:7.2f} us  {rate / best['raw']:.2f}x"
            f"  CPU {least_cpu[name] * 1e6:7.2f} us"
        )
    for name in [name for name in best if name.endswith(" traced")]:
        plain = name.removesuffix(" traced")
        print(
            f"  tracing on, {plain}: CPU {(least_cpu[name] - least_cpu[plain]) * 1e6:+.2f} "
            f"us/msg ({least_cpu[name] / least_cpu[plain]:.2f}x), rate "
            f"{best[name] / best[plain]:.2f}x the untraced"
        )
    if "raw_positional" in best:
        print(
            "  against raw_positional: "
            + ", ".join(
                f"{name} {best[name] / best['raw_positional']:.2f}x"
                for name in ("enqueue_many", "enqueue_batch")
            )
        )
    if arguments.profile:
        print("\nwhere the time goes")
        for name in ("enqueue_many", "enqueue_batch"):
            where_the_time_goes(
                name, runs[name], arguments.messages, arguments.top,
                show_top=arguments.top > 0,
            )  # fmt: skip


def traced_runs(
    settings: tenantq.Settings,
    requests: list[EnqueueRequest],
    arguments: argparse.Namespace,
    sink: Any,
) -> dict[str, Callable[[], float]]:
    """With ``--tracing``: each SDK run again with OpenTelemetry on (spans batched and
    exported as OTLP/HTTP to ``sink``, an ``otlp_sink.OtlpSink``, the last ones inside the
    clock), and ``enqueue`` one job per call both ways, on the first ``--single`` requests:
    a call is a span, so that is where tracing costs most."""
    from tenantq.observability import tracing

    single = requests[: arguments.single]

    def traced(run: Callable[[Callable[[], object]], float]) -> Callable[[], float]:
        def run_traced() -> float:
            provider = sink.tracer_provider()
            tracing.use_provider(provider)
            try:
                return run(provider.force_flush)
            finally:
                tracing.use_provider(None)
                provider.shutdown()

        return run_traced

    chunk = arguments.chunk
    return {
        "enqueue_many traced": traced(lambda end: run_sdk(settings, requests, chunk, end)),
        "enqueue_batch traced": traced(lambda end: run_batch(settings, requests, chunk, end)),
        "enqueue": lambda: run_sdk(settings, single, 1),
        "enqueue traced": traced(lambda end: run_sdk(settings, single, 1, end)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating raw/many/batch rounds")
    parser.add_argument("--chunk", type=int, default=10_000, help="requests per call")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--profile", action="store_true", help="profile one more run of each")
    parser.add_argument("--top", type=int, default=0, help="with --profile: top N functions")
    parser.add_argument("--keep-topics", action="store_true")
    parser.add_argument(
        "--raw-positional",
        action="store_true",
        help="also run raw produce with positional arguments, as the SDK calls it",
    )
    parser.add_argument(
        "--eager",
        action="store_true",
        help="also run enqueue_many reading every future as each call returns (as code that "
        "keeps a list of them does: each future is then made while its job is in flight)",
    )
    parser.add_argument(
        "--tune-gc",
        action="store_true",
        help="freeze the prepared inputs out of the cyclic GC and raise its gen-0 threshold, "
        "as a high-rate producer process may (shows how much of the SDK cost is GC)",
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="also run each SDK path with OpenTelemetry tracing on (OTLP/HTTP to a sink in "
        "this process), and enqueue one job per call with and without it",
    )
    parser.add_argument(
        "--single", type=int, default=5_000, help="with --tracing: jobs enqueued one per call"
    )
    arguments = parser.parse_args(argv)

    print(machine_speed.measure().describe("at the start"))
    sink: Any = contextlib.nullcontext()
    if arguments.tracing:
        from otlp_sink import OtlpSink

        sink = OtlpSink()
    with (
        bench_settings(
            "bench", QUEUE, arguments.partitions, keep_topics=arguments.keep_topics
        ) as settings,
        sink as receiver,
    ):
        compare(settings, arguments, receiver)
        if receiver is not None:
            print(f"spans received by the OTLP sink: {receiver.spans():,}")
    print(machine_speed.measure().describe("at the end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
