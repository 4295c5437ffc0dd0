"""The job state machine: the seven states, every allowed transition, and the closed set of
ways an attempt can end, in one place.

The store's SQL guards each transition with the same rules (``store/statements.py``), and the
database enforces the invariants that follow from them (``finished_at`` set exactly on terminal
states, a lease exactly on ``leased``). ``docs/state_machine.md`` draws this table.
"""

from __future__ import annotations

import enum


class JobState(enum.StrEnum):
    """Where a job is in its life. Terminal: succeeded, dead, canceled."""

    PENDING = "pending"
    RUNNABLE = "runnable"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    DEAD = "dead"
    CANCELED = "canceled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELED})

#: The states a worker may take a lease from.
LEASABLE_STATES = frozenset({JobState.PENDING, JobState.RUNNABLE, JobState.RETRYING})

#: (from, to) -> why. The only transitions the store performs.
TRANSITIONS: dict[tuple[JobState, JobState], str] = {
    (JobState.PENDING, JobState.RUNNABLE): "run_after reached",
    (JobState.PENDING, JobState.LEASED): "due message taken by a worker",
    (JobState.PENDING, JobState.CANCELED): "canceled before it ran",
    (JobState.PENDING, JobState.DEAD): "enqueued in SQL, refused by the outbox relay",
    (JobState.RUNNABLE, JobState.LEASED): "a worker took the lease",
    (JobState.RUNNABLE, JobState.CANCELED): "canceled before it ran",
    (JobState.RUNNABLE, JobState.DEAD): "attempts exhausted or undecodable",
    (JobState.RETRYING, JobState.LEASED): "retry due, a worker took the lease",
    (JobState.RETRYING, JobState.CANCELED): "canceled between attempts",
    (JobState.RETRYING, JobState.DEAD): "attempts exhausted at lease time",
    (JobState.LEASED, JobState.SUCCEEDED): "handler returned",
    (JobState.LEASED, JobState.RETRYING): "retryable failure, snooze, or lease released",
    (JobState.LEASED, JobState.DEAD): "permanent failure or attempts exhausted",
    (JobState.LEASED, JobState.CANCELED): "cancellation observed by the running job",
    (JobState.LEASED, JobState.RUNNABLE): "lease released on shutdown or revoke",
    (JobState.LEASED, JobState.LEASED): "expired lease taken over by a new owner",
    (JobState.DEAD, JobState.RUNNABLE): "replayed from the DLQ",
}


class Outcome(enum.StrEnum):
    """How one attempt ended: ``tenantq_job_attempts.outcome``, the ``outcome`` label of the
    worker's metrics, and the ``job.<outcome>`` log events. The SQL CHECK and the metric label
    set are derived from this list; nothing else spells an outcome out."""

    SUCCEEDED = "succeeded"
    #: Failed; runs again after its backoff.
    RETRYING = "retrying"
    DEAD = "dead"
    CANCELED = "canceled"
    #: Shutdown, revoke or a stopping worker: the lease is given back with the attempt.
    RELEASED = "released"
    #: ``Snooze`` or a dependency that is not ready: later, with the attempt given back.
    SNOOZED = "snoozed"
    #: The handler overran its timeout (retried, or dead when attempts are used up).
    TIMEOUT = "timeout"
    #: The store refused the result: the attempt no longer held the lease. Written by the
    #: store only, never decided by a worker.
    STALE = "stale"
    #: The process running the attempt died (a handler that killed it, the OOM killer). The
    #: attempt is not counted against ``max_attempts``; the job's ``crashes`` is, and a job
    #: that was running in ``crash_budget`` process deaths is dead (a poison job).
    CRASHED = "crashed"


#: Outcomes a worker decides and reports (``stale`` is the store's refusal, counted apart).
DECIDED_OUTCOMES = frozenset(Outcome) - {Outcome.STALE}


class IllegalTransition(ValueError):
    """A transition the state machine does not allow."""


def check_transition(current: JobState, target: JobState) -> str:
    """Return why ``current -> target`` is allowed, or raise ``IllegalTransition``."""
    try:
        return TRANSITIONS[(current, target)]
    except KeyError:
        raise IllegalTransition(f"{current.value} -> {target.value} is not allowed") from None


def sources_of(target: JobState) -> frozenset[JobState]:
    """Every state a job may reach ``target`` from; the store builds its guards from this."""
    return frozenset(source for source, to in TRANSITIONS if to is target)
