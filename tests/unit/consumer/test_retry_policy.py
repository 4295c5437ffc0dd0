"""The retry policy's formula and bounds."""

from __future__ import annotations

import pytest
from fakes import seeded_retry_policy

from tenantq.consumer.retry_policy import RetryPolicy


def test_backoff_grows_within_jitter_band_and_caps() -> None:
    p = seeded_retry_policy()
    for attempt, ceiling in [(1, 2), (2, 6), (3, 18), (4, 54), (5, 60), (400, 60)]:
        for _ in range(50):
            delay = p.delay(attempt)
            assert ceiling * 0.5 <= delay <= ceiling


def test_no_jitter_is_exact() -> None:
    assert seeded_retry_policy(jitter=0).delay(3) == 18


@pytest.mark.parametrize("bad", [{"base_delay": 0}, {"multiplier": float("nan")}, {"jitter": 2}])
def test_policy_rejects_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)  # type: ignore[arg-type]
