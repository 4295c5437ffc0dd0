"""WorkerMetrics: each event is recorded as what it means, and the scrape stays bounded whatever
the tenants and error classes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tenantq.observability.labels import OTHER
from tenantq.observability.worker_metrics import ERROR_LABEL_LIMIT, WorkerMetrics


def _label_values(registry: CollectorRegistry, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in registry.collect()
        for sample in family.samples
        if label in sample.labels
    }


def test_scrape_stays_bounded_with_many_tenants_and_error_classes() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry, top_tenants=5)
    for index in range(2_000):
        tenant = f"tenant-{index}"
        worker.job_started("default", "send_email", tenant, 0.5)
        worker.job_finished("default", "send_email", tenant, "succeeded", 0.1, 1)
        worker.retried("default", "send_email", f"Error{index}")
    worker.flush()
    tenants = _label_values(registry, "tenant")
    assert len(tenants) == 6 and OTHER in tenants
    assert len(_label_values(registry, "error_class")) == ERROR_LABEL_LIMIT + 1
    assert len(generate_latest(registry)) < 60_000


def test_job_events_are_recorded() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry, top_tenants=5)
    worker.job_started("default", "export", "acme", 2.0)
    worker.job_started("default", "export", "acme", None)
    worker.job_started("default", "export", "acme", -0.2)  # clock skew counts as 0
    worker.job_finished("default", "export", "acme", "retrying", 1.5, 1)
    worker.job_finished("default", "export", "acme", "succeeded", 0.5, 3)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    started = {"queue": "default", "job_type": "export", "tenant": "acme"}
    # Job counts and timings are written once a poll round, at flush.
    assert value("tenantq_jobs_started_total", **started) == 0
    worker.flush()
    assert value("tenantq_jobs_started_total", **started) == 3
    assert value("tenantq_enqueue_to_start_seconds_count", queue="default", job_type="export") == 2
    assert value("tenantq_enqueue_to_start_seconds_sum", queue="default", job_type="export") == 2.0
    finished = {"queue": "default", "job_type": "export", "tenant": "acme"}
    assert value("tenantq_jobs_finished_total", **finished, outcome="succeeded") == 1
    assert value("tenantq_jobs_finished_total", **finished, outcome="retrying") == 1
    duration = {"queue": "default", "job_type": "export", "outcome": "retrying"}
    assert value("tenantq_job_duration_seconds_sum", **duration) == 1.5
    attempts = {"queue": "default", "job_type": "export"}
    assert value("tenantq_attempts_per_success_sum", **attempts) == 3
    assert value("tenantq_attempts_per_success_count", **attempts) == 1
    with pytest.raises(ValueError, match="unknown outcome"):
        worker.job_finished("default", "export", "acme", "exploded", 1.0, 1)


def test_a_nan_wait_or_duration_is_recorded_as_zero() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry, top_tenants=5)
    worker.job_started("default", "export", "acme", float("nan"))
    worker.job_started("default", "export", "acme", 1.5)
    worker.job_finished("default", "export", "acme", "succeeded", float("nan"), 1)
    worker.job_finished("default", "export", "acme", "succeeded", 0.25, 1)
    worker.flush()

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    waits = {"queue": "default", "job_type": "export"}
    assert value("tenantq_enqueue_to_start_seconds_count", **waits) == 2
    assert value("tenantq_enqueue_to_start_seconds_sum", **waits) == 1.5
    durations = {"queue": "default", "job_type": "export", "outcome": "succeeded"}
    assert value("tenantq_job_duration_seconds_count", **durations) == 2
    assert value("tenantq_job_duration_seconds_sum", **durations) == 0.25


def _samples(registry: CollectorRegistry) -> str:
    """The scrape without the series' creation times (they differ between registries)."""
    lines = generate_latest(registry).decode().splitlines()
    return "\n".join(line for line in lines if "_created" not in line)


def test_batch_events_record_what_the_events_one_by_one_record() -> None:
    """``jobs_started`` / ``jobs_finished`` (what the worker reports per batch) write the same
    samples as ``job_started`` / ``job_finished`` of each, past the tenant label bound, with
    negative and NaN timings counted as 0, and the same refusal of an unknown outcome."""
    nan = float("nan")
    started = [
        ("default", "export", f"tenant-{index % 9}", wait)
        for index, wait in enumerate([2.0, None, -0.2, 0.5, nan, 1.0] * 5)
    ]
    finished = [
        ("default", "export", f"tenant-{index % 9}", outcome, duration, attempts)
        for index, (outcome, duration, attempts) in enumerate(
            [("succeeded", 0.5, 3), ("retrying", 1.5, 1), ("succeeded", -1.0, 0)] * 7
        )
    ]
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    single = WorkerMetrics(one_by_one, top_tenants=4)
    batch = WorkerMetrics(batched, top_tenants=4)
    for event in started:
        single.job_started(*event)
    for ended in finished:
        single.job_finished(*ended)  # type: ignore[arg-type]
    batch.jobs_started(started[:10])
    batch.jobs_started(started[10:])
    batch.jobs_finished(finished)  # type: ignore[arg-type]
    single.flush()
    batch.flush()
    assert _samples(batched) == _samples(one_by_one)
    assert 'tenant="other"' in _samples(batched)
    with pytest.raises(ValueError, match="unknown outcome"):
        batch.jobs_finished([("default", "export", "acme", "exploded", 1.0, 1)])  # type: ignore[list-item]


def test_read_delays_are_recorded_per_queue_and_source_at_flush() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry)
    worker.messages_read(
        [
            ("default", "main", 0.25),
            ("default", "main", 0.5),
            ("default", "hot_lane", 9.0),
            ("mail", "main", -0.1),
        ]
    )

    def value(name: str, queue: str, source: str = "main") -> float | None:
        return registry.get_sample_value(name, {"queue": queue, "source": source})

    assert not value("tenantq_read_delay_seconds_count", "default")  # not before flush
    worker.flush()
    assert value("tenantq_read_delay_seconds_count", "default") == 2
    assert value("tenantq_read_delay_seconds_sum", "default") == 0.75
    # The lane's backlog is a series of its own: it does not raise the main topic's delay.
    assert value("tenantq_read_delay_seconds_count", "default", "hot_lane") == 1
    assert value("tenantq_read_delay_seconds_sum", "default", "hot_lane") == 9.0
    # A producer clock ahead of the worker's is skew, counted as no delay.
    assert value("tenantq_read_delay_seconds_count", "mail") == 1
    assert value("tenantq_read_delay_seconds_sum", "mail") == 0.0


def test_lease_dependency_and_consumer_events_are_recorded() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry)
    worker.lease_takeover("default")
    worker.lease_expired("default")
    worker.lease_expired("default")
    worker.stale_result_refused("default", count=3)
    worker.stale_result_refused("default", count=0)
    worker.dead_lettered("default", "export", "max_attempts")
    worker.dead_lettered("default", "export", "not a reason!")
    worker.utilization(busy=3, slots=4)
    worker.dependency_call("smtp", 0.2)
    worker.dependency_throttled("smtp")
    worker.breaker_state("smtp", "half_open")
    worker.consumer_lag("tenantq.default", 3, 42)
    worker.committed_message_age("default", 12.5)

    get = registry.get_sample_value
    assert get("tenantq_lease_takeovers_total", {"queue": "default"}) == 1
    assert get("tenantq_lease_expirations_total", {"queue": "default"}) == 2
    assert get("tenantq_stale_results_refused_total", {"queue": "default"}) == 3
    dead = {"queue": "default", "job_type": "export"}
    assert get("tenantq_dead_lettered_total", {**dead, "reason": "max_attempts"}) == 1
    assert get("tenantq_dead_lettered_total", {**dead, "reason": OTHER}) == 1
    assert get("tenantq_worker_utilization_ratio") == 0.75
    assert get("tenantq_worker_busy_slots") == 3 and get("tenantq_worker_slots") == 4
    assert get("tenantq_dependency_latency_seconds_count", {"dependency": "smtp"}) == 1
    assert get("tenantq_dependency_throttles_total", {"dependency": "smtp"}) == 1
    assert get("tenantq_breaker_state", {"dependency": "smtp"}) == 2
    lag = {"topic": "tenantq.default", "partition": "3"}
    assert get("tenantq_consumer_lag_messages", lag) == 42
    assert get("tenantq_committed_message_age_seconds", {"queue": "default"}) == 12.5

    worker.partition_revoked("tenantq.default", 3)
    worker.partition_revoked("tenantq.default", 3)  # twice is harmless
    assert get("tenantq_consumer_lag_messages", lag) is None
    worker.utilization(busy=0, slots=0)
    assert get("tenantq_worker_utilization_ratio") == 0
    with pytest.raises(ValueError, match="unknown breaker state"):
        worker.breaker_state("smtp", "ajar")


def test_results_waiting_gauge_follows_the_count() -> None:
    """Written only when the count changes; the scrape shows the latest count each time,
    negative counts as 0."""
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry)

    def shown() -> float | None:
        return registry.get_sample_value("tenantq_worker_results_waiting")

    assert shown() == 0.0
    for count, expected in ((0, 0.0), (5, 5.0), (5, 5.0), (2, 2.0), (-3, 0.0), (0, 0.0), (7, 7.0)):
        worker.results_waiting(count)
        assert shown() == expected


_MULTIPROCESS_SCRIPT = """
import warnings
warnings.simplefilter("error")  # prometheus-client's "not implemented" warning fails the run
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from tenantq.observability.worker_metrics import WorkerMetrics

worker = WorkerMetrics(CollectorRegistry())
worker.consumer_lag("tenantq.default", 3, 42)
worker.consumer_lag("tenantq.default", 4, 7)
worker.partition_revoked("tenantq.default", 3)
served = CollectorRegistry()
MultiProcessCollector(served)  # what the supervisor serves: the members' files
for family in served.collect():
    for sample in family.samples:
        if sample.name == "tenantq_consumer_lag_messages":
            print(sample.labels["partition"], sample.value)
"""


def test_a_revoked_partition_reads_zero_lag_from_a_member_in_multiprocess_mode(
    tmp_path: Path,
) -> None:
    # prometheus-client picks its file-backed values at import: a fresh interpreter.
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _MULTIPROCESS_SCRIPT],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    served = dict(line.split() for line in done.stdout.splitlines())
    # The revoked partition's series is this member's no more: 0, not its last value (the
    # new owner's lag and a lingering 42 would add up on the dashboard).
    assert served == {"3": "0.0", "4": "7.0"}
