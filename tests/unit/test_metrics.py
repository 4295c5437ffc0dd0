"""Metrics: every name is declared once and prefixed; tenant and error labels stay bounded
whatever the input; WorkerMetrics records what each event means; invalid strings never
become labels."""

from __future__ import annotations

import threading

import psycopg
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tenantq.errors import InvalidTenantId
from tenantq.observability import specs as metrics
from tenantq.observability.labels import OTHER, TenantLabeler, is_tenant_label
from tenantq.observability.queue_stats import QueueStatsCollector
from tenantq.observability.worker_metrics import ERROR_LABEL_LIMIT, WorkerMetrics
from tenantq.partitioner.tenant_id import validate_tenant_id


def _label_values(registry: CollectorRegistry, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in registry.collect()
        for sample in family.samples
        if label in sample.labels
    }


def test_names_are_unique_prefixed_and_exported() -> None:
    names = [spec.name for spec in metrics.SPECS]
    assert len(names) == len(set(names))
    assert all(name.startswith(metrics.PREFIX) for name in names)
    constants = {
        value
        for key, value in vars(metrics).items()
        if key.isupper()
        and key != "PREFIX"
        and isinstance(value, str)
        and value.startswith(metrics.PREFIX)
    }
    assert constants == set(names), "every name constant has a spec and vice versa"
    assert "tenantq_jobs_finished_total" in metrics.exported_sample_names()
    assert "tenantq_job_duration_seconds_bucket" in metrics.exported_sample_names()


def test_worker_metrics_and_collector_share_a_registry_without_clash() -> None:
    registry = CollectorRegistry()
    WorkerMetrics(registry)
    registry.register(QueueStatsCollector(_unreachable_database))  # describe() runs no query
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        WorkerMetrics(registry)


def test_tenant_labeler_keeps_first_n_and_folds_the_rest() -> None:
    labeler = TenantLabeler(top_n=3)
    assert [labeler.label(t) for t in ("a", "b", "a", "c", "d", "e", "b")] == [
        "a",
        "b",
        "a",
        "c",
        OTHER,
        OTHER,
        "b",
    ]
    assert labeler.labelled() == {"a", "b", "c"}


def test_tenant_labeler_preload_wins_over_arrival_order() -> None:
    labeler = TenantLabeler(top_n=2)
    labeler.preload(["big", "bigger", "third"])
    assert labeler.label("small") == OTHER
    assert labeler.label("bigger") == "bigger"
    assert labeler.labelled() == {"big", "bigger"}


def test_tenant_labeler_zero_labels_everything_other() -> None:
    labeler = TenantLabeler(top_n=0)
    assert labeler.label("acme") == OTHER
    with pytest.raises(ValueError):
        TenantLabeler(top_n=-1)


@pytest.mark.parametrize(
    "bad", ["", "x" * 129, "has space", "tenant#3", "évil", "a\nb", None, 42, b"bytes"]
)
def test_invalid_tenant_never_becomes_a_label(bad: object) -> None:
    labeler = TenantLabeler(top_n=100)
    assert labeler.label(bad) == OTHER
    assert labeler.labelled() == frozenset()


@pytest.mark.parametrize(
    "value", ["acme", "a", "x" * 128, "org:42.eu-1_b", "", "x" * 129, "a b", "t#1", "ü", "a/b"]
)
def test_tenant_label_rule_matches_the_tenant_id_rule(value: str) -> None:
    try:
        validate_tenant_id(value)
        valid = True
    except InvalidTenantId:
        valid = False
    assert is_tenant_label(value) is valid


def test_labeler_bound_holds_under_concurrency() -> None:
    labeler = TenantLabeler(top_n=10)
    barrier = threading.Barrier(8)

    def hammer(offset: int) -> None:
        barrier.wait()
        for index in range(500):
            labeler.label(f"tenant-{(index * 7 + offset) % 300}")

    threads = [threading.Thread(target=hammer, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(labeler.labelled()) == 10


def test_scrape_stays_bounded_with_many_tenants_and_error_classes() -> None:
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry, top_tenants=5)
    for index in range(2_000):
        tenant = f"tenant-{index}"
        worker.job_started("default", "send_email", tenant, 0.5)
        worker.job_finished("default", "send_email", tenant, "succeeded", 0.1, 1)
        worker.retried("default", "send_email", f"Error{index}")
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

    assert (
        value("tenantq_jobs_started_total", queue="default", job_type="export", tenant="acme") == 3
    )
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


def _unreachable_database() -> psycopg.Connection[object]:
    # Port 1 on localhost refuses at once: a real connection failure, not a stand-in.
    return psycopg.connect("postgresql://tenantq@127.0.0.1:1/none", connect_timeout=2)


def test_collector_survives_an_unreachable_database() -> None:
    registry = CollectorRegistry()
    registry.register(QueueStatsCollector(_unreachable_database, min_interval_seconds=0))
    text = generate_latest(registry).decode()
    assert "tenantq_stats_up 0.0" in text
    assert "tenantq_queue_depth{" not in text
