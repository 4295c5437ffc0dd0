"""MetricTally: what it gathers and writes once is what the metrics would hold had every
job been recorded on its own, buckets and sums included."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tenantq.observability.tally import MetricTally

BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)


def _families(registry: CollectorRegistry) -> tuple[Counter, Histogram]:
    counter = Counter("jobs", "jobs", ["tenant"], registry=registry)
    histogram = Histogram("wait", "wait", ["tenant"], registry=registry, buckets=BUCKETS)
    return counter, histogram


def test_a_flush_writes_what_one_write_per_value_would() -> None:
    draws = random.Random(7)
    # Values on the bounds themselves, between them, past the last and zero.
    values = [*BUCKETS, 0.0, 7.5, *(draws.uniform(0, 6) for _ in range(500))]
    tenants = [draws.choice(["acme", "globex", "initech"]) for _ in values]

    one_by_one = CollectorRegistry()
    counter, histogram = _families(one_by_one)
    for tenant, value in zip(tenants, values, strict=True):
        counter.labels(tenant).inc()
        histogram.labels(tenant).observe(value)

    gathered = CollectorRegistry()
    counter, histogram = _families(gathered)
    tally = MetricTally()
    for tenant, value in zip(tenants, values, strict=True):
        tally.count(counter.labels(tenant))
        tally.observe(histogram.labels(tenant), value)
    assert gathered.get_sample_value("jobs_total", {"tenant": "acme"}) == 0
    tally.flush()

    def without_created(registry: CollectorRegistry) -> list[str]:
        return [
            line
            for line in generate_latest(registry).decode().splitlines()
            if "_created" not in line
        ]

    assert without_created(gathered) == without_created(one_by_one)
    tally.flush()  # nothing gathered since: nothing written twice
    assert without_created(gathered) == without_created(one_by_one)
