"""JobCounts: the counts of one slice of jobs, added up and written out for JSON."""

from __future__ import annotations

from tenantq.store.stats import JobCounts


def test_counts_as_json_lead_with_the_depth_then_every_field_in_order() -> None:
    counts = JobCounts(pending=1, runnable=2, leased=3, retrying=4, dead_last_hour=5)
    assert list(counts.as_dict().items()) == [
        ("depth", 10),
        ("pending", 1),
        ("runnable", 2),
        ("leased", 3),
        ("retrying", 4),
        ("dead_last_hour", 5),
        ("succeeded_last_minute", 0),
        ("oldest_runnable_age_seconds", None),
    ]


def test_added_counts_sum_and_keep_the_oldest_age() -> None:
    total = JobCounts(pending=1, oldest_runnable_age_seconds=3.0) + JobCounts(
        leased=2, oldest_runnable_age_seconds=7.5
    )
    assert (total.pending, total.leased, total.depth) == (1, 2, 3)
    assert total.oldest_runnable_age_seconds == 7.5
