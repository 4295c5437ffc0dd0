"""The claim-ahead estimate: a batch ahead for short jobs, none for long ones, never past
its limit, back to none when jobs stop finishing; what the slots end soon falls at once."""

from __future__ import annotations

from tenantq.consumer.claim_ahead import ClaimAhead


def finishing(ahead: ClaimAhead, per_second: float, seconds: float, start: float = 0.0) -> float:
    """Jobs finish at ``per_second`` for ``seconds`` in 10 ms steps; returns the time after."""
    now = start
    for _ in range(round(seconds / 0.01)):
        now += 0.01
        ahead.finished(round(per_second * 0.01), now)
    return now


def test_short_jobs_are_claimed_about_two_claim_round_trips_ahead() -> None:
    ahead = ClaimAhead(limit=1_000, now=0.0)
    for _ in range(20):
        ahead.claim_answered(0.005)
    finishing(ahead, per_second=10_000, seconds=3.0)
    # 10,000 finishes a second, 5 ms claims: 100 jobs free up during two claims.
    assert 95 <= ahead.jobs <= 105


def test_the_limit_caps_it_and_zero_turns_it_off() -> None:
    capped = ClaimAhead(limit=32, now=0.0)
    off = ClaimAhead(limit=0, now=0.0)
    for estimate in (capped, off):
        estimate.claim_answered(0.005)
        finishing(estimate, per_second=10_000, seconds=2.0)
    assert capped.jobs == 32
    assert off.jobs == 0


def test_long_jobs_get_nothing_claimed_ahead() -> None:
    ahead = ClaimAhead(limit=1_000, now=0.0)
    ahead.claim_answered(0.005)
    now = 0.0
    for _ in range(30):  # 4 slots of 1-second jobs: 4 finishes a second
        now += 0.25
        ahead.finished(1, now)
    assert ahead.jobs == 0


def test_nothing_is_claimed_ahead_before_anything_is_known() -> None:
    assert ClaimAhead(limit=100, now=0.0).jobs == 0


def test_the_estimate_falls_when_jobs_stop_finishing() -> None:
    ahead = ClaimAhead(limit=1_000, now=0.0)
    ahead.claim_answered(0.005)
    now = finishing(ahead, per_second=10_000, seconds=2.0)
    assert ahead.jobs > 50
    for _ in range(20):  # the loop keeps reporting, with nothing finished
        now += 0.25
        ahead.finished(0, now)
    assert ahead.jobs == 0


def test_what_the_slots_end_soon_falls_within_a_window_when_long_jobs_follow_short_ones() -> None:
    ahead = ClaimAhead(limit=1_000, now=0.0)
    ahead.claim_answered(0.01)
    now = finishing(ahead, per_second=10_000, seconds=3.0)
    assert 450 <= ahead.finishing_within(0.05) <= 500
    # 32 slots of 1-second jobs from now on: 32 finishes a second, 8 per window.
    for _ in range(2):  # the first window still holds short jobs' finishes
        now += 0.25
        ahead.finished(8, now)
    assert ahead.finishing_within(0.05) <= 2
    assert ahead.jobs > 10  # the claim-ahead estimate itself is smoothed; it falls later
