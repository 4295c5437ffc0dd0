"""The state machine: terminal states are final (except a replay of a dead job), and every
leasable state can be leased or canceled."""

from __future__ import annotations

import pytest
from tenantq.states import (
    LEASABLE_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    IllegalTransition,
    JobState,
    check_transition,
    sources_of,
)


def test_seven_states() -> None:
    assert [s.value for s in JobState] == [
        "pending",
        "runnable",
        "leased",
        "succeeded",
        "retrying",
        "dead",
        "canceled",
    ]


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
