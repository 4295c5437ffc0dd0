"""The share-group spike's side of the throughput benchmark: the same no-op jobs through
``python -m tenantq.consumer.share`` (``ShareWorker``, one share-group member per process,
the same Postgres ledger), so that its rate stands beside the consumer-group worker's in one
sitting (``throughput_bench.py --share 512x1``).

A run is ``bench_tenantq``'s with two differences. P member processes are started side by
side (there is no supervisor: the spike has none). The completion check cannot read
committed offsets (a share group commits none, and the preview client has no share-group
admin calls), so it counts the succeeded rows of the run's queue every 0.5 s on the
benchmark's own connection (its backend is left out of PostgreSQL's CPU, not its I/O). Once, the raw
``ShareConsumer`` (implicit acknowledgement, no decoding, no database) reads the same topic:
the ceiling a share-group worker can reach on this broker.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from bench_ledger import (
    KafkaSide,
    handler_environment,
    record_half_load,
    succeeded,
    succeeded_window,
)
from bench_run import (
    Measured,
    add_workers,
    monitor_connection,
    note_exits,
    server_sampler,
    start_sampled,
    stop_all,
    wait_until,
    worker_labeler,
)
from bench_tenantq import enqueue
from bench_topics import reading_rate
from confluent_kafka import ShareConsumer
from throughput_app import QUEUE

import tenantq
from tenantq.consumer.share.group import ShareGroupOptions, configure_share_group
from tenantq.store.engine import psycopg_url

#: The system name of these runs in the report (the Kafka broker's CPU counts, as tenantq's).
SYSTEM = "share"


@dataclass(frozen=True)
class ShareConfig:
    """``--concurrency`` of each member and how many member processes; ``t``: handlers in
    threads (``TENANTQ_WORKER__HANDLER_PROCESS=false``); ``a``: an async no-op."""

    concurrency: int
    processes: int
    threads: bool = False
    asynchronous: bool = False

    @classmethod
    def parse(cls, text: str) -> ShareConfig:
        """``512x1``, ``512x2t``, ``512x2ta`` (as ``TenantqConfig.parse``, without
        ``default``)."""
        asynchronous = text.endswith("a")
        text = text.removesuffix("a")
        threads = text.endswith("t")
        concurrency, _, processes = text.removesuffix("t").partition("x")
        return cls(int(concurrency), int(processes or 1), threads, asynchronous)

    @property
    def label(self) -> str:
        label = f"share c{self.concurrency} p{self.processes}"
        if self.threads:
            label += " threads"
        return label + (", async handler" if self.asynchronous else "")

    def arguments(self) -> list[str]:
        return ["--concurrency", str(self.concurrency)]


def raw_share_rate(settings: tenantq.Settings, topic: str, count: int) -> float:
    """Messages/s of a bare ``ShareConsumer`` (implicit acknowledgement) reading ``count``
    messages of ``topic`` in a fresh share group: no decoding, no database."""
    group = f"bench-raw-share-{uuid.uuid4().hex[:8]}"
    configure_share_group(settings, group, ShareGroupOptions())
    consumer = ShareConsumer(settings.kafka_client_config(**{"group.id": group}))
    consumer.subscribe([topic])
    return reading_rate(lambda: consumer.poll(0.5), consumer.close, count, 180)


class ShareSide(KafkaSide):
    """Runs share-worker configurations against the benchmark's own database."""

    def run(self, config: ShareConfig, tag: str, *, raw: bool) -> tuple[Measured, float | None]:
        """One measured run; with ``raw``, the raw share consumer's rate on the same topic."""
        with self.run_settings("tshare") as (settings, user_kafka_config):
            topic = f"{settings.topic_prefix}.{QUEUE}"
            enqueue(settings, self.options.jobs)
            measured = self._measure(config, settings, tag, user_kafka_config)
            rate = raw_share_rate(settings, topic, self.options.jobs) if raw else None
        return measured, rate

    def _measure(
        self,
        config: ShareConfig,
        settings: tenantq.Settings,
        tag: str,
        kafka_config: dict[str, str],
    ) -> Measured:
        options = self.options
        environment = handler_environment(settings, kafka_config, config)
        command = [
            sys.executable,
            "-m",
            "tenantq.consumer.share",
            "throughput_app:APP",
            *config.arguments(),
        ]
        monitor = monitor_connection(psycopg_url(self.url))
        sampler = server_sampler(self.servers, self.database, options.sample_interval, monitor)
        logs = [options.report_dir / f"{tag}-m{index}.log" for index in range(config.processes)]
        idle, launched, members = start_sampled(sampler, command, environment, logs)
        add_workers(
            sampler,
            [member.pid for member in members],
            worker_labeler(None, member_marker="tenantq.consumer.share"),
        )
        try:
            wait_until(
                lambda: succeeded(monitor) >= options.jobs, members, 600, "all jobs succeeded"
            )
            first_start, finishes = succeeded_window(monitor)
            measured = Measured.of_window(
                sampler,
                system=SYSTEM,
                label=config.label,
                command=" ".join(
                    ["python -m tenantq.consumer.share throughput_app:APP", *config.arguments()]
                )
                + (f" (x{config.processes} processes)" if config.processes > 1 else ""),
                first_start=first_start,
                finishes=finishes,
                launched=launched,
                background=idle,
            )
            if options.latency_seconds > 0:
                self._half_load(measured, settings, monitor, members, sampler)
        finally:
            statuses = stop_all(sampler, members, monitor)
        note_exits(measured, statuses, "a member")
        return measured

    def _half_load(
        self,
        measured: Measured,
        settings: tenantq.Settings,
        monitor: psycopg.Connection[Any],
        members: list[Any],
        sampler: Any,
    ) -> None:
        """As ``TenantqSide._half_load``: enqueue at half the measured rate, enqueue-to-start
        from the rows."""
        rate, count = self.options.half_load(measured.rate)
        before = succeeded(monitor)
        phase_start = enqueue(settings, count, rate)
        wait_until(
            lambda: succeeded(monitor) >= before + count, members, 300, "half-load jobs done"
        )
        record_half_load(measured, monitor, sampler, rate, phase_start)
