"""Guarantee: the hot-partition load test (``loadtest/hot_partition.py``) runs end to end on the
real servers in a few seconds (two ``tenantq worker`` processes, a capacity burst, a small
flood) and leaves a report folder whose numbers are sane: every asked job was sent and
acknowledged, percentiles are ordered, the hot tenant got what it asked for while capacity
was left, and the run's own rows and topics are gone afterwards."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psycopg
from support import run_tool

import tenantq
from tenantq.settings import QueueSettings
from tenantq.topic_admin import declared_topics

TOOL = Path(__file__).resolve().parents[2] / "loadtest" / "hot_partition.py"
PLOTS = ("latency", "partition-lag", "throughput", "lane")
COLD_RATE = 20.0
HOT_RATE = 10 * COLD_RATE


def test_hot_partition_tool_writes_a_sane_report(
    servers: tuple[str, str], database_url: str, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    bootstrap, _ = servers
    report = tmp_path / "report"
    output = run_tool(
        [sys.executable, str(TOOL), "--scenario", "flood-10x", "--report-dir", str(report)]
        + ["--calm-seconds", "2", "--flood-seconds", "2", "--after-seconds", "1"]
        + ["--cold-tenants", "10", "--cold-rate", str(COLD_RATE), "--saturation-jobs", "300"]
        + ["--drain-timeout", "30"],
        servers,
        database_url,
        timeout=120,
    )
    assert "cold p50 / p99, calm" in output  # the side-by-side table was printed
    assert (report / "report.md").read_text().startswith("# tenantq hot-partition load test")
    facts = json.loads((report / "summary.json").read_text())
    (run,) = facts["runs"]
    for what in PLOTS:
        assert (report / f"flood-10x.{what}.png").stat().st_size > 0, what

    assert run["valid"] and not run["problems"]
    assert run["workers"] == 2 and run["slots_per_worker"] == 32
    assert [p["name"] for p in run["phases"]] == ["calm", "flood", "after"]
    capacity = run["capacity"]
    assert capacity["method"] == "measured"
    assert 0 < capacity["jobs_per_second"] <= 1.2 * capacity["slots_bound_jobs_per_second"]

    # The producer is not what limits the run: everything asked was sent and acknowledged.
    for klass, phases in run["producer"].items():
        for phase, count in phases.items():
            assert count["sent"] >= 0.95 * count["planned"], (klass, phase, count)
            assert count["acknowledged"] == count["sent"] and count["failed"] == 0
    assert run["producer"]["hot"]["flood"]["planned"] == 2 * HOT_RATE

    cold = run["latency_seconds"]["cold"]
    for phase in ("calm", "flood", "after"):
        lat = cold[phase]
        assert lat["jobs"] > 0 and lat["not_started"] == 0, (phase, lat)
        assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] < 10, (phase, lat)
    hot = run["latency_seconds"]["hot"]["flood"]
    assert hot["jobs"] == run["producer"]["hot"]["flood"]["acknowledged"]

    done = run["done_when"]
    assert done["load_phase"] == "flood"
    assert done["cold_calm_p99"] == cold["calm"]["p99"]
    assert done["p99_ratio"] == done["cold_load_p99"] / done["cold_calm_p99"]
    # 200 jobs/s is far below two workers' capacity: the hot tenant gets about what it asks.
    assert 0.6 * HOT_RATE <= done["hot_throughput"] <= 1.3 * HOT_RATE, done
    assert done["unused_capacity"] == capacity["jobs_per_second"] - done["cold_throughput"]
    assert abs(done["hot_share_of_unused"] * done["unused_capacity"] - done["hot_throughput"]) < 1
    assert run["max_lag"] > 0  # lag was sampled while the hot tenant sent
    assert abs(run["clock_offset_seconds"]) < 1.0

    # The run's rows and topics are removed (it had a queue and a prefix of its own).
    assert db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE queue = %s", (run["queue"],)
    ).fetchone() == (0,)
    settings = tenantq.Settings(
        kafka_bootstrap_servers=bootstrap,
        database_url=database_url,
        topic_prefix=run["topic_prefix"],
        queues={run["queue"]: QueueSettings()},
    )
    from tenantq.topic_admin import admin_client

    existing = set(admin_client(settings).list_topics(timeout=10).topics)
    assert not existing & {spec.name for spec in declared_topics(settings)}
