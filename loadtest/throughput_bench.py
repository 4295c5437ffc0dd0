"""End-to-end throughput of no-op jobs: tenantq (``tenantq worker``, full Postgres ledger)
against PgQueuer's best configuration, side by side in one run on the same servers.

For each configuration, in rounds (``--runs``; every round runs each configuration once, so
a busy machine slows both alike):

1. N no-op jobs of 200 tenants are enqueued first (tenantq: ``Producer.enqueue_batch`` into
   fresh topics; PgQueuer: its ``enqueue``), so enqueueing is outside the measured window;
2. the worker is started as a user would start it (``python -m tenantq.cli worker
   throughput_app:APP [--concurrency C] [--processes P]``; PgQueuer: what ``pgq run`` does,
   ``--batch-size B``) and drains the backlog; jobs/s = N / (last job finished - first job
   started), both stamped by PostgreSQL;
3. CPU microseconds per job of each process group, from ``/proc/<pid>/stat`` sampled every
   0.1 s (``bench_cpu``): the worker (its supervisor and every descendant), the Kafka broker
   (pid from the dev stack's state.json) and PostgreSQL (the postmaster and every process
   whose parent it is), between the first sample after the first start and the last one
   before the last finish, divided by the jobs finished in between. PostgreSQL is shown as a
   whole and as what the run caused (its database's backends and the server's WAL writer,
   checkpointer and I/O workers; the dev server is shared with other users, and autovacuum
   workers, short-lived, count in the whole only);
4. then, with the same workers running, jobs are enqueued at half the measured rate for
   ``--latency-seconds`` and enqueue-to-start p50/p99 is read from the database;
5. with ``--end-to-end N``, the same workers, drained and waiting, get N more jobs enqueued
   as fast as each system's own client takes them from this process, timed from the first
   enqueue call to the last job recorded succeeded (a second table, and the ratio to
   PgQueuer's best end-to-end rate of the same round).

Completion checks cost nothing measurable: tenantq's reads the workers' committed offsets
(one OffsetFetch to the broker every 0.5 s, no database query while jobs run); PgQueuer's
asks whether its queue table still holds a row every 0.5 s on a connection whose backend is
left out of PostgreSQL's CPU. Each system gets a database of its own on the dev stack's
server (dropped at the end). Once, the raw confluent-kafka consumer reads the same topic
(no decoding, no database: the ceiling any worker on this broker can reach).

    python loadtest/throughput_bench.py                     # make bench: defaults, one round
    python loadtest/throughput_bench.py --runs 3            # min and median of 3 rounds
    python loadtest/throughput_bench.py --tenantq 2048x2t --pgqueuer 500x2 --latency-seconds 0
    python loadtest/throughput_bench.py --tenantq 512x1 --share 512x1 --pgqueuer ''  # spike
    python loadtest/throughput_bench.py --tenantq 2048x2t,2048x2tq --pgqueuer '' --runs 2  # rows

With ``--share`` (a Kafka 4.2+ broker), the share-group spike (``bench_share``) runs the same
jobs in every round, each share configuration next to the consumer-group one of the same
position (alternating which goes first), and the footer gives each share configuration's
rate over the consumer-group worker's of the same shape, same round.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import machine_speed
import psycopg
from bench_pgqueuer import MISSING, PgqueuerConfig, PgqueuerSide
from bench_report import (
    background_text,
    best,
    end_to_end_rate,
    end_to_end_table,
    round_ratios,
    summarize,
    table,
    write_report,
)
from bench_run import Measured, RunOptions, Servers, median
from bench_share import ShareConfig, ShareSide
from bench_tenantq import (
    TenantqConfig,
    TenantqSide,
    prepare_database,
    seed_history,
)

import tenantq
from tenantq.devstack.processes import pid_alive
from tenantq.devstack.stack import DevStack, external_endpoints
from tenantq.store.engine import psycopg_url


def find_servers() -> Servers:
    """The dev stack's servers (or the ``TENANTQ_*`` ones) and the pids to sample: the broker
    from state.json, the postmaster as the parent of one of our backends (any local server)."""
    settings = tenantq.load_settings()
    external_kafka, _ = external_endpoints()
    state = DevStack(settings.dev_home).read_state()
    kafka_pid = state.get("kafka_pid")
    url = settings.require_database_url()
    with psycopg.connect(psycopg_url(url)) as connection:
        backend = int(connection.info.backend_pid)
        postmaster: int | None = None  # not on this host: no CPU figure for it
        try:
            # A remote server's backend pid may name some local process: check it is ours.
            if b"postgres" in Path(f"/proc/{backend}/cmdline").read_bytes():
                stat = Path(f"/proc/{backend}/stat").read_bytes()
                postmaster = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError):
            pass
    return Servers(
        bootstrap_servers=settings.require_bootstrap_servers(),
        database_url=url,
        kafka_pid=int(kafka_pid)
        if kafka_pid and not external_kafka and pid_alive(kafka_pid)
        else None,
        postmaster_pid=postmaster,
    )


def describe(run: Measured) -> str:
    cpu = run.micros_per_job()
    parts = [f"{run.label}: {run.rate:,.0f} jobs/s over {run.seconds:.2f} s"]
    parts.append(f"start-up {run.startup_seconds:.1f} s")
    if cpu:
        parts.append(
            "CPU µs/job " + " · ".join(f"{name} {value:,.0f}" for name, value in cpu.items())
        )
    if run.latency is not None:
        parts.append(
            f"at {run.latency.rate:,.0f} jobs/s p50 {run.latency.p50 * 1000:,.0f} ms "
            f"p99 {run.latency.p99 * 1000:,.0f} ms"
        )
    if run.end_to_end is not None:
        total = run.end_to_end_micros().get("total")
        parts.append(
            f"end to end {run.end_to_end.rate:,.0f} jobs/s over {run.end_to_end.seconds:.2f} s"
            + ("" if total is None else f", CPU {total:,.0f} µs/job")
        )
    if run.background:
        parts.append("servers' background before start " + background_text(run))
    return "; ".join(parts + run.notes)


def drop_database(servers: Servers, name: str) -> None:
    with psycopg.connect(psycopg_url(servers.database_url), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def round_order(
    round_number: int, tenantq: list[TenantqConfig], share: list[ShareConfig]
) -> list[tuple[int, TenantqConfig | ShareConfig]]:
    """The runs of one round, as (index in its list, configuration): the k-th consumer-group
    configuration and the k-th share configuration side by side, the group's first in odd
    rounds and the share's first in even ones, so that a machine slowing down within a round
    weighs on both alike; without share configurations, the group's in their order."""
    order: list[tuple[int, TenantqConfig | ShareConfig]] = []
    for index in range(max(len(tenantq), len(share))):
        pair: list[tuple[int, TenantqConfig | ShareConfig]] = []
        if index < len(tenantq):
            pair.append((index, tenantq[index]))
        if index < len(share):
            pair.append((index, share[index]))
        order.extend(pair if round_number % 2 else pair[::-1])
    return order


def share_ratios(
    results: list[Measured], raw_rate: float | None, raw_share: float | None
) -> list[str]:
    """Per share configuration, its rate over the consumer-group worker's of the same slots,
    processes and handlers in the same round (median and range over the rounds), and the
    raw consumers' rates side by side."""

    def shape(label: str) -> str:  # "c512 p2 threads" of "tenantq c512 p2 threads"
        return label.split(" ", 1)[1].removesuffix(" (defaults)")

    twins = {(run.round_number, shape(run.label)): run for run in results
             if run.system == "tenantq"}  # fmt: skip
    ratios: dict[str, list[float]] = {}
    for run in results:
        twin = twins.get((run.round_number, shape(run.label)))
        if run.system == "share" and twin is not None and twin.rate > 0:
            ratios.setdefault(f"{run.label} ÷ {twin.label}", []).append(run.rate / twin.rate)
    lines = [
        f"**{name}** (same round): median {median(values):.2f}, "
        f"range {min(values):.2f}-{max(values):.2f} over {len(values)} round(s)."
        for name, values in ratios.items()
    ]
    if raw_share:
        ceiling = f"Raw ShareConsumer of the same topic (implicit acks): {raw_share:,.0f} msg/s"
        if raw_rate:
            ceiling += f", {raw_share / raw_rate:.2f} of the raw consumer-group consumer's"
        lines.append(ceiling + ".")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs",
        type=int,
        default=200_000,
        help="no-op jobs per run; enough for many lease renewals (one per "
        "heartbeat_interval_seconds, 5 s) in the measured window, whose cost a run of a few "
        "seconds leaves out",
    )
    parser.add_argument("--runs", type=int, default=1, help="rounds of every configuration")
    parser.add_argument(
        "--tenantq",
        default="default,defaulto,512x1,512x2t,2048x2t",
        help="worker configurations, CONCURRENCYxPROCESSES, comma-separated ('default': no "
        "flags; a 't' after it: handlers in threads, without the handler process; then an "
        "'a': the no-op is an async def handler, as PgQueuer's is; an 'o' at the end: "
        "OpenTelemetry tracing on, spans exported as OTLP/HTTP to a sink process; a 'q' after "
        "everything: a tenantq_tenants row for each of the 200 tenants, with limits never "
        "reached, written before the jobs)",
    )
    parser.add_argument(
        "--pgqueuer",
        default="100x1,100x2,500x1,500x2,default",
        help="PgQueuer batch sizes, BATCHxPROCESSES for several `pgq run` ('' to leave it "
        "out); the best of batch 100/500 x 1/2 processes is the reference of every ratio "
        "(500x2 has been its best on a 2-core machine: 200-1000 per batch and 2-3 processes "
        "swept, 500 and 1000 tie, 100 is 20-25%% slower, a third process adds nothing), and "
        "its default batch of 10 is shown beside them",
    )
    parser.add_argument(
        "--share",
        default="",
        help="share-group spike configurations (python -m tenantq.consumer.share), "
        "CONCURRENCYxPROCESSES[t][a] as for --tenantq, comma-separated; the k-th runs next to "
        "the k-th --tenantq configuration in every round, after it in odd rounds and before "
        "it in even ones (default: none; a broker of Kafka 4.2 or newer)",
    )
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="0: no half load")
    parser.add_argument(
        "--latency-rate",
        type=float,
        default=None,
        help="jobs/s of the latency phase (default: half of each configuration's measured "
        "rate); one rate for all compares latency at one load",
    )
    parser.add_argument(
        "--end-to-end",
        type=int,
        default=0,
        metavar="N",
        help="after the latency phase, N more jobs (e.g. 100000) enqueued as fast as each "
        "system's client takes them from this process while its workers, drained, wait; timed "
        "from the first enqueue call to the last job recorded succeeded (default 0: no such "
        "phase)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=100_000,
        help="finished jobs in tenantq's ledger before the first run (a deployment's table)",
    )
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--sample-interval", type=float, default=0.1, help="CPU sampling, s")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw consumer")
    parser.add_argument("--report-dir", type=Path, default=None)
    parser.add_argument(
        "--start-trace",
        type=Path,
        default=None,
        help="trace tenantq's start path through the latency phase into this folder: per-job "
        "stage timestamps from the workers, the ledger's stamps, pg_stat_activity every 5 ms "
        "(python loadtest/bench_start_trace.py DIR prints the breakdown); the wrapping costs "
        "the workers a little: not for reported throughput",
    )
    arguments = parser.parse_args(argv)

    tenantq_configs = [TenantqConfig.parse(text) for text in arguments.tenantq.split(",") if text]
    pgqueuer_configs = [PgqueuerConfig.parse(t) for t in arguments.pgqueuer.split(",") if t]
    share_configs = [ShareConfig.parse(text) for text in arguments.share.split(",") if text]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report_dir = arguments.report_dir or Path("reports") / f"throughput-{stamp}"
    report_dir.mkdir(parents=True, exist_ok=True)
    servers = find_servers()
    header = [
        f"{arguments.jobs:,} no-op jobs per run"
        + (f", then {arguments.end_to_end:,} end to end" if arguments.end_to_end else "")
        + f", {arguments.runs} round(s); Kafka "
        f"{servers.bootstrap_servers}, PostgreSQL {servers.database_url.rsplit('@', 1)[-1]}",
        machine_speed.measure().describe("at the start"),
    ]
    if servers.kafka_pid is None:
        header.append("Kafka CPU not counted: the broker is not the dev stack's (no pid here).")
    if servers.postmaster_pid is None:
        header.append("PostgreSQL CPU not counted: the server is not on this host.")
    if pgqueuer_configs and MISSING:
        header.append(f"PgQueuer side skipped: {MISSING}.")
        pgqueuer_configs = []
    for line in header:
        print(line)

    suffix = uuid.uuid4().hex[:8]
    tenantq_database = f"tqbench_{suffix}"
    pgqueuer_database = f"pgqbench_{suffix}"
    results: list[Measured] = []
    raw_rate: float | None = None
    raw_share: float | None = None
    created: list[str] = []
    tenantq_side: TenantqSide | None = None
    try:
        seed_history(prepare_database(servers, tenantq_database), arguments.history)
        created.append(tenantq_database)
        options = RunOptions(
            arguments.jobs,
            arguments.latency_seconds,
            arguments.sample_interval,
            report_dir,
            arguments.latency_rate,
            arguments.end_to_end,
            arguments.start_trace,
        )
        tenantq_side = TenantqSide(servers, tenantq_database, options, arguments.partitions)
        share_side = ShareSide(servers, tenantq_database, options, arguments.partitions)
        pgqueuer_side = None
        if pgqueuer_configs:
            with psycopg.connect(psycopg_url(servers.database_url), autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{pgqueuer_database}"')
            created.append(pgqueuer_database)
            pgqueuer_side = PgqueuerSide(servers, pgqueuer_database, options)
            pgqueuer_side.install()
        for round_number in range(1, arguments.runs + 1):
            first_share = True
            for index, config in round_order(round_number, tenantq_configs, share_configs):
                if isinstance(config, ShareConfig):
                    tag = (
                        f"r{round_number}-share-c{config.concurrency}-p{config.processes}"
                        f"{'t' if config.threads else ''}{'a' if config.asynchronous else ''}"
                    )
                    want_raw = round_number == 1 and first_share and not arguments.no_raw
                    first_share = False
                    measured, rate = share_side.run(config, tag, raw=want_raw)
                    raw_share = rate if rate is not None else raw_share
                else:
                    concurrency = config.concurrency or "default"
                    tag = (
                        f"r{round_number}-tenantq-c{concurrency}-p{config.processes or 'default'}"
                        f"{'t' if config.threads else ''}{'a' if config.asynchronous else ''}"
                    )
                    want_raw = round_number == 1 and index == 0 and not arguments.no_raw
                    measured, rate = tenantq_side.run(config, tag, raw=want_raw)
                    raw_rate = rate if rate is not None else raw_rate
                measured.round_number = round_number
                results.append(measured)
                print(f"round {round_number} · {describe(measured)}", flush=True)
            for pgqueuer_config in pgqueuer_configs:
                assert pgqueuer_side is not None
                tag = (
                    f"r{round_number}-pgqueuer-b{pgqueuer_config.batch_size}"
                    f"-p{pgqueuer_config.processes}"
                )
                measured = pgqueuer_side.run(pgqueuer_config, tag)
                measured.round_number = round_number
                results.append(measured)
                print(f"round {round_number} · {describe(measured)}", flush=True)
    finally:
        if tenantq_side is not None:
            tenantq_side.close()
        for name in created:
            drop_database(servers, name)

    summaries = summarize(results)
    footer = []
    ratios = round_ratios(results)
    top_tenantq, top_pgqueuer = best(summaries, "tenantq"), best(summaries, "pgqueuer")
    if ratios and top_tenantq is not None and top_pgqueuer is not None:
        footer.append(
            f"**tenantq ÷ PgQueuer** (the best of each in the same round): median "
            f"{median(ratios):.2f}, min {min(ratios):.2f} over {len(ratios)} round(s); best "
            f"medians: {top_tenantq.label} against {top_pgqueuer.label}."
        )
    end_to_end = round_ratios(results, end_to_end_rate)
    if end_to_end:
        footer.append(
            f"**tenantq ÷ PgQueuer end to end** ({arguments.end_to_end:,} jobs enqueued to the "
            f"running workers, the best of each in the same round): median "
            f"{median(end_to_end):.2f}, min {min(end_to_end):.2f} over {len(end_to_end)} "
            f"round(s)."
        )
    defaults = defaults_ratios(results)
    if ratios and defaults:
        footer.append(
            f"**Defaults and fastest, ÷ PgQueuer's best of the same round**: "
            f"`tenantq worker` with no flags median {median(defaults):.2f} (min "
            f"{min(defaults):.2f}); the fastest tenantq configuration median "
            f"{median(ratios):.2f} (min {min(ratios):.2f})."
        )
    if raw_rate:
        first = results[0]
        footer.append(
            f"Raw confluent-kafka consumer of the same topic (no decoding, no database): "
            f"{raw_rate:,.0f} msg/s; {first.label} ÷ raw = {first.rate / raw_rate:.4f}."
        )
    footer.extend(share_ratios(results, raw_rate, raw_share))
    background = [b for run in results if (b := run.kafka_background()) is not None]
    if background:
        footer.append(
            f"While PgQueuer ran, the shared Kafka broker (unused by it) still took "
            f"{median(background) * 1000:,.0f} ms of CPU per second: background that tenantq's "
            f"Kafka figure holds too."
        )
    footer.append(machine_speed.measure().describe("at the end"))
    footer.append(
        "CPU µs/job: worker = the worker's processes (tenantq: supervisor, members, handler "
        "processes); Postgres = this run's database's backends + the server's own processes "
        "(WAL writer, checkpointer, I/O workers); Postgres (all) = every child of the "
        "postmaster and those it reaped (autovacuum and other users of the shared server "
        "included). "
        "Kafka is the shared dev broker as a whole."
    )
    print()
    for line in [*table(summaries), "", *end_to_end_table(summaries, results), *footer]:
        print(line)
    files = write_report(
        report_dir,
        results,
        header,
        footer,
        {
            "jobs": arguments.jobs,
            "rounds": arguments.runs,
            "end_to_end_jobs": arguments.end_to_end,
            "raw_consumer_msg_per_s": raw_rate,
        },
    )
    print(f"\nreport: {report_dir}/ ({', '.join(files)})")
    return 0


def defaults_ratios(results: list[Measured]) -> list[float]:
    """Per round: ``tenantq worker`` with no flags (the untraced defaults run) over the best
    PgQueuer rate of the same round."""
    ratios = []
    for round_number in sorted({run.round_number for run in results}):
        runs = [run for run in results if run.round_number == round_number]
        pgqueuer = [run.rate for run in runs if run.system == "pgqueuer"]
        defaults = [run.rate for run in runs if run.label.endswith("(defaults)")]
        if pgqueuer and defaults:
            ratios.append(defaults[0] / max(pgqueuer))
    return ratios


if __name__ == "__main__":
    sys.exit(main())
