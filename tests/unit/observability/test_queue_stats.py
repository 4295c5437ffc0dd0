"""The queue statistics collector: it registers beside WorkerMetrics without a clash, and an
unreachable database is a gauge, not an error."""

from __future__ import annotations

import psycopg
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tenantq.observability.queue_stats import QueueStatsCollector
from tenantq.observability.worker_metrics import WorkerMetrics


def _unreachable_database() -> psycopg.Connection[object]:
    # Port 1 on localhost refuses at once: a real connection failure, not a stand-in.
    return psycopg.connect("postgresql://tenantq@127.0.0.1:1/none", connect_timeout=2)


def test_collector_survives_an_unreachable_database() -> None:
    registry = CollectorRegistry()
    registry.register(QueueStatsCollector(_unreachable_database, min_interval_seconds=0))
    text = generate_latest(registry).decode()
    assert "tenantq_stats_up 0.0" in text
    assert "tenantq_queue_depth{" not in text


def test_worker_metrics_and_collector_share_a_registry_without_clash() -> None:
    registry = CollectorRegistry()
    WorkerMetrics(registry)
    registry.register(QueueStatsCollector(_unreachable_database))  # describe() runs no query
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        WorkerMetrics(registry)
