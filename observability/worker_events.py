"""What a worker reports as it runs: one method per event, each a no-op here.

Side concerns subscribe by overriding the events they care about, instead of the worker
guarding each call site (``tenantq.observability.worker_metrics.WorkerMetrics`` records them as
Prometheus metrics). Every method is called from the worker's poll thread, except
``lease_expired`` and ``database_up``, which other threads may report; a subscriber must not
block.
"""

from __future__ import annotations

from tenantq.states import Outcome

#: Where a message was read from (the ``source`` of ``messages_read``): a queue's main topic, or
#: its hot lane, whose backlog is a flooding tenant's and waits seconds by design.
READ_FROM_MAIN = "main"
READ_FROM_HOT_LANE = "hot_lane"


class WorkerEvents:
    """The closed list of worker events. Subclass and override; the base ignores them all."""

    # -- jobs -------------------------------------------------------------------------------

    def job_started(
        self, queue: str, job_type: str, tenant: str, wait_seconds: float | None
    ) -> None:
        """An attempt started; ``wait_seconds`` is how long the job waited since it was due
        (None when unknown, or on a later attempt)."""

    def job_finished(
        self,
        queue: str,
        job_type: str,
        tenant: str,
        outcome: Outcome,
        duration_seconds: float,
        attempts: int,
    ) -> None:
        """An attempt ended with ``outcome`` after ``duration_seconds``; ``attempts`` is the
        job's attempt count."""

    def jobs_started(self, started: list[tuple[str, str, str, float | None]]) -> None:
        """Attempts started together: ``job_started`` of each (queue, job type, tenant, wait
        seconds). A subscriber may record them in one go."""
        for queue, job_type, tenant, wait_seconds in started:
            self.job_started(queue, job_type, tenant, wait_seconds)

    def jobs_finished(self, finished: list[tuple[str, str, str, Outcome, float, int]]) -> None:
        """Attempts whose results were written together: ``job_finished`` of each (queue, job
        type, tenant, outcome, duration seconds, attempts). A subscriber may record them in
        one go."""
        for queue, job_type, tenant, outcome, duration_seconds, attempts in finished:
            self.job_finished(queue, job_type, tenant, outcome, duration_seconds, attempts)

    def messages_read(self, delays: list[tuple[str, str, float]]) -> None:
        """Messages of the main topics and hot lanes were read: (queue, source, seconds since
        each one's Kafka timestamp), one call per poll; the source is ``READ_FROM_MAIN`` or
        ``READ_FROM_HOT_LANE``."""

    def flush(self) -> None:
        """The poll loop ended a round: what a subscriber gathers per job is due now (a
        subscriber may record ``job_started`` and ``job_finished`` at the next flush rather
        than at once)."""

    def retried(self, queue: str, job_type: str, error_class: str) -> None:
        """A failed attempt was scheduled to run again."""

    def dead_lettered(self, queue: str, job_type: str, reason: str) -> None:
        """A job (or an undecodable message) was written to the dead-letter topic."""

    # -- leases -----------------------------------------------------------------------------

    def lease_takeover(self, queue: str) -> None:
        """This worker took over a lease another owner let expire (or left behind)."""

    def lease_expired(self, queue: str) -> None:
        """A lease this worker held was lost before its job finished (it expired and the job
        moved on: taken over, or refused as stale)."""

    def stale_result_refused(self, queue: str, count: int = 1) -> None:
        """The store refused ``count`` results of attempts that no longer held the lease."""

    # -- capacity and consumption -----------------------------------------------------------

    def utilization(self, busy: int, slots: int) -> None:
        """``busy`` of ``slots`` handler slots are running a job."""

    def consumer_lag(self, topic: str, partition: int, lag: int) -> None:
        """The consumer is ``lag`` messages behind the log end of ``topic``/``partition``."""

    def partition_revoked(self, topic: str, partition: int) -> None:
        """The worker no longer owns ``topic``/``partition`` (revoked or lost)."""

    def committed_message_age(self, queue: str, seconds: float) -> None:
        """The oldest message of ``queue`` not yet durably done was produced ``seconds`` ago."""

    def quota_throttled(self, queue: str, tenant: str, reason: str, count: int) -> None:
        """The claim held back ``count`` jobs of ``tenant`` in ``queue`` for its limit
        ``reason`` (``tenantq.tenant_limits.ThrottleReason``: max_running, rate, weight);
        they wait, untouched, and are asked for again."""

    def tenant_moved_to_lane(self, queue: str, tenant: str) -> None:
        """This worker moved ``tenant`` to the hot lane of ``queue``."""

    def lane_diverted(self, queue: str, count: int) -> None:
        """``count`` messages of hot-lane tenants went from the main topic to the lane."""

    def handler_process_restarted(self) -> None:
        """The handler process died (with or without jobs running) and another was started."""

    def database_up(self, up: bool) -> None:
        """The worker reaches PostgreSQL again (True) or has lost it (False). Called from the
        thread that found out."""

    def results_waiting(self, count: int) -> None:
        """``count`` writes (results, claims) wait for PostgreSQL."""

    # -- dependencies -----------------------------------------------------------------------

    def dependency_call(self, dependency: str, seconds: float) -> None:
        """A call to ``dependency`` took ``seconds``."""

    def dependency_throttled(self, dependency: str) -> None:
        """``dependency`` throttled a call (429, or its local token bucket was empty)."""

    def breaker_state(self, dependency: str, state: str) -> None:
        """The circuit breaker of ``dependency`` is now ``state`` (closed, open, half_open)."""
