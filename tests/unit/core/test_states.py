"""The state machine: terminal states are final (except a replay of a dead job), and every
leasable state can be leased or canceled."""

from __future__ import annotations

import pytest

from tenantq.states import (
    DECIDED_OUTCOMES,
    LEASABLE_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    IllegalTransition,
    JobState,
    Outcome,
    check_transition,
    sources_of,
)


def test_seven_states() -> None:
    seven = ["pending", "runnable", "leased", "succeeded", "retrying", "dead", "canceled"]
    assert [s.value for s in JobState] == seven


def test_terminal_states_have_no_way_out_but_replay() -> None:
    for source, target in TRANSITIONS:
        if source in TERMINAL_STATES:
            assert (source, target) == (JobState.DEAD, JobState.RUNNABLE)


@pytest.mark.parametrize("state", sorted(LEASABLE_STATES))
def test_leasable_states_can_be_leased_and_canceled(state: JobState) -> None:
    assert check_transition(state, JobState.LEASED)
    assert check_transition(state, JobState.CANCELED)


def test_illegal_transition_is_refused() -> None:
    with pytest.raises(IllegalTransition, match="succeeded -> runnable"):
        check_transition(JobState.SUCCEEDED, JobState.RUNNABLE)


def test_sources_of_succeeded_is_only_leased() -> None:
    assert sources_of(JobState.SUCCEEDED) == {JobState.LEASED}


def test_every_state_is_reachable_or_initial() -> None:
    targets = {target for (_, target) in TRANSITIONS}
    assert set(JobState) - targets <= {JobState.PENDING}


def test_outcomes_are_one_closed_list_that_labels_and_sql_derive_from() -> None:
    from tenantq.observability.worker_metrics import JOB_OUTCOMES
    from tenantq.store.models import attempt_log

    assert JOB_OUTCOMES == {outcome.value for outcome in DECIDED_OUTCOMES}
    assert set(Outcome) - DECIDED_OUTCOMES == {Outcome.STALE}
    (check,) = [
        c for c in attempt_log.constraints if "outcome_known" in str(getattr(c, "name", ""))
    ]
    listed = str(check.sqltext).split("IN (", 1)[1].rstrip(")").split(", ")  # type: ignore[attr-defined]
    assert [value.strip("'") for value in listed] == [outcome.value for outcome in Outcome]
