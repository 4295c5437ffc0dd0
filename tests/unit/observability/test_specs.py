"""Metric specs: every name is declared once, prefixed, and exported."""

from __future__ import annotations

from tenantq.observability import specs as metrics


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
