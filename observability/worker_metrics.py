"""``WorkerMetrics``: the metrics a worker process records as it runs jobs.

It subscribes to the worker's events (``tenantq.observability.worker_events.WorkerEvents``):
each method knows which families it touches, so the worker never handles a metric object or a
label. Tenant labels go through a ``TenantLabeler`` and error classes and dead-letter reasons
through a ``BoundedLabel``, so neither tenant count nor exception variety can blow up a scrape.
"""

from __future__ import annotations

import math
import os
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from tenantq.observability import specs as names
from tenantq.observability.labels import BoundedLabel, TenantLabeler, is_identifier_label
from tenantq.observability.tally import MetricTally
from tenantq.observability.worker_events import WorkerEvents
from tenantq.states import DECIDED_OUTCOMES, Outcome

#: The ``outcome`` label values: the outcomes a worker decides (``stale`` is counted by
#: ``stale_result_refused``), from ``tenantq.states.Outcome``.
JOB_OUTCOMES: frozenset[str] = frozenset(outcome.value for outcome in DECIDED_OUTCOMES)

#: Circuit breaker states and the gauge value each is exported as.
BREAKER_STATES: dict[str, int] = {"closed": 0, "open": 1, "half_open": 2}

#: Distinct error classes / dead-letter reasons kept per process before ``other``.
ERROR_LABEL_LIMIT = 50

#: Job classes whose series the batch events remember by tenant id (not by its label: no
#: label lookup per job); past this many the memo starts over, so no tenant count grows it
#: without bound. A tenant's label never changes once given, so a memo entry stays right.
SERIES_REMEMBERED = 10_000


def multiprocess_mode() -> bool:
    """Whether prometheus-client writes this process's samples to a shared folder (it decides
    so from the environment, as the process imports it)."""
    return bool(
        os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")
    )


def _non_negative(value: float) -> float:
    # Clocks of producer, database and worker differ slightly: a negative wait is skew, not
    # news, and a NaN would poison the histogram's sum forever.
    if math.isnan(value) or value < 0:
        return 0.0
    return value


class WorkerMetrics(WorkerEvents):
    """The worker-side metric families, registered on ``registry`` (a fresh
    ``CollectorRegistry`` when none is given, so tests and several workers in one process
    never collide on the global registry).

    ``top_tenants`` tenants keep their own label (``Settings.metrics_top_tenants``); the
    rest are ``other``. Methods raise ``ValueError`` for an unknown outcome or breaker state:
    both are closed lists, and a typo should fail a test rather than invent a series.
    """

    def __init__(self, registry: CollectorRegistry | None = None, top_tenants: int = 20) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tenants = TenantLabeler(top_tenants)
        self.error_classes = BoundedLabel(ERROR_LABEL_LIMIT, is_identifier_label)
        self.reasons = BoundedLabel(ERROR_LABEL_LIMIT, is_identifier_label)
        #: Typed loosely: each kind of family has its own methods (``inc``, ``observe``, ``set``).
        self._families: dict[str, Any] = {}
        self._series = _JobSeries(self._families, self.tenants)
        self._read_delay: dict[tuple[str, str], Any] = {}
        #: The same series by tenant id, for the batch events (``SERIES_REMEMBERED``).
        self._started_of: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._finished_of: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}
        #: What job_started and job_finished record, written at ``flush`` (the poll thread).
        self._tally = MetricTally()
        #: The results-waiting gauge's value as last written (-1: never).
        self._results_waiting = -1
        for spec in names.SPECS:
            if spec.source == "worker":
                self._families[spec.name] = _build(spec, self.registry)
        self.database_up(True)

    # -- jobs -------------------------------------------------------------------------------

    def job_started(
        self, queue: str, job_type: str, tenant: str, wait_seconds: float | None
    ) -> None:
        """An attempt started; ``wait_seconds`` is how long the job waited since it was due
        (None when unknown, e.g. a job whose enqueue time was not recorded)."""
        self.jobs_started([(queue, job_type, tenant, wait_seconds)])

    def job_finished(
        self,
        queue: str,
        job_type: str,
        tenant: str,
        outcome: Outcome | str,
        duration_seconds: float,
        attempts: int,
    ) -> None:
        """An attempt ended with ``outcome`` (one of ``JOB_OUTCOMES``) after
        ``duration_seconds``; ``attempts`` is the job's attempt count, observed as attempts
        per success when the outcome is ``succeeded``."""
        self.jobs_finished(
            [(queue, job_type, tenant, cast(Outcome, outcome), duration_seconds, attempts)]
        )

    def jobs_started(self, started: list[tuple[str, str, str, float | None]]) -> None:
        """``job_started`` of each (its one implementation), gathered by job class first: a
        dictionary lookup per job instead of a label lookup, two tally calls and a check
        (a quarter of the time per job)."""
        waits_of: dict[tuple[str, str, str], list[float | None]] = {}
        for queue, job_type, tenant, wait_seconds in started:
            key = (queue, job_type, tenant)
            waits = waits_of.get(key)
            if waits is None:
                waits_of[key] = [wait_seconds]
            else:
                waits.append(wait_seconds)
        memo = self._started_of
        tally = self._tally
        for key, waits in waits_of.items():
            series = memo.get(key)
            if series is None:
                if len(memo) >= SERIES_REMEMBERED:
                    memo.clear()
                series = memo[key] = self._series.started(*key)
            started_counter, waited = series
            tally.count_many(started_counter, len(waits))
            # ``_non_negative`` inline: ``>= 0`` is False for NaN too, so skew and poison
            # both count as no wait.
            tally.observe_many(
                waited, [wait if wait >= 0 else 0.0 for wait in waits if wait is not None]
            )

    def jobs_finished(self, finished: list[tuple[str, str, str, Outcome, float, int]]) -> None:
        """``job_finished`` of each, gathered by job class and outcome first (see
        ``jobs_started``)."""
        gathered: dict[tuple[str, str, str, str], tuple[list[float], list[float]]] = {}
        for queue, job_type, tenant, outcome, duration_seconds, attempts in finished:
            key = (queue, job_type, tenant, outcome)
            lists = gathered.get(key)
            if lists is None:
                lists = gathered[key] = ([], [])
            lists[0].append(duration_seconds if duration_seconds >= 0 else 0.0)
            lists[1].append(attempts if attempts > 1 else 1)
        memo = self._finished_of
        tally = self._tally
        for job_class, (durations, attempts_seen) in gathered.items():
            series = memo.get(job_class)
            if series is None:
                if len(memo) >= SERIES_REMEMBERED:
                    memo.clear()
                series = memo[job_class] = self._series.finished(*job_class)
            finished_counter, duration, attempts_per_success = series
            tally.count_many(finished_counter, len(durations))
            tally.observe_many(duration, durations)
            if job_class[3] == Outcome.SUCCEEDED:
                tally.observe_many(attempts_per_success, attempts_seen)

    def messages_read(self, delays: list[tuple[str, str, float]]) -> None:
        """Messages were read: (queue, source, seconds since each one's Kafka timestamp),
        observed at the next flush."""
        series = self._read_delay
        observe = self._tally.observe
        for queue, source, seconds in delays:
            histogram = series.get((queue, source))
            if histogram is None:
                family = self._families[names.READ_DELAY]
                histogram = series[(queue, source)] = family.labels(queue, source)
            observe(histogram, _non_negative(seconds))

    def flush(self) -> None:
        """Write the job counts and timings gathered since the last round."""
        self._tally.flush()

    def retried(self, queue: str, job_type: str, error_class: str) -> None:
        """A failed attempt was scheduled to run again."""
        label = self.error_classes.label(error_class)
        self._families[names.RETRIES].labels(queue, job_type, label).inc()

    def dead_lettered(self, queue: str, job_type: str, reason: str) -> None:
        """A job was written to the dead-letter topic (``reason``: the error class, or
        ``max_attempts``, ``undecodable``...)."""
        label = self.reasons.label(reason)
        self._families[names.DEAD_LETTERED].labels(queue, job_type, label).inc()

    # -- leases -----------------------------------------------------------------------------

    def lease_takeover(self, queue: str) -> None:
        """This worker took over a lease another owner let expire."""
        self._families[names.LEASE_TAKEOVERS].labels(queue).inc()

    def lease_expired(self, queue: str) -> None:
        """A lease this worker held expired before its job finished."""
        self._families[names.LEASE_EXPIRATIONS].labels(queue).inc()

    def stale_result_refused(self, queue: str, count: int = 1) -> None:
        """The store refused ``count`` results of attempts that no longer held the lease."""
        if count > 0:
            self._families[names.STALE_RESULTS_REFUSED].labels(queue).inc(count)

    # -- capacity ---------------------------------------------------------------------------

    def utilization(self, busy: int, slots: int) -> None:
        """``busy`` of ``slots`` handler slots are running a job."""
        self._families[names.WORKER_BUSY_SLOTS].set(max(0, busy))
        self._families[names.WORKER_SLOTS].set(max(0, slots))
        ratio = min(1.0, max(0, busy) / slots) if slots > 0 else 0.0
        self._families[names.WORKER_UTILIZATION].set(ratio)

    # -- dependencies -----------------------------------------------------------------------

    def dependency_call(self, dependency: str, seconds: float) -> None:
        """A call to ``dependency`` took ``seconds``."""
        self._families[names.DEPENDENCY_LATENCY].labels(dependency).observe(_non_negative(seconds))

    def dependency_throttled(self, dependency: str) -> None:
        """``dependency`` throttled a call (429, or its local token bucket was empty)."""
        self._families[names.DEPENDENCY_THROTTLES].labels(dependency).inc()

    def breaker_state(self, dependency: str, state: str) -> None:
        """The circuit breaker of ``dependency`` is now ``state`` (closed, open, half_open)."""
        try:
            value = BREAKER_STATES[state]
        except KeyError:
            raise ValueError(
                f"unknown breaker state {state!r}; expected one of {sorted(BREAKER_STATES)}"
            ) from None
        self._families[names.BREAKER_STATE].labels(dependency).set(value)

    # -- consumer ---------------------------------------------------------------------------

    def consumer_lag(self, topic: str, partition: int, lag: int) -> None:
        """The consumer is ``lag`` messages behind the log end of ``topic``/``partition``."""
        self._families[names.CONSUMER_LAG].labels(topic, str(partition)).set(max(0, lag))

    def partition_revoked(self, topic: str, partition: int) -> None:
        """Forget the lag of a partition this worker no longer owns, so its series does not
        linger at the last value after a rebalance (the new owner's and this one's would
        add up). In prometheus-client's multiprocess mode (``tenantq worker``: members write
        to files the supervisor serves) a series cannot be removed: the file keeps the last
        value. There this member's series of the partition is set to 0 instead."""
        family = self._families[names.CONSUMER_LAG]
        if multiprocess_mode():
            family.labels(topic, str(partition)).set(0)
            return
        try:
            family.remove(topic, str(partition))
        except KeyError:
            pass

    def quota_throttled(self, queue: str, tenant: str, reason: str, count: int) -> None:
        """The claim held back ``count`` jobs of a tenant for one of its limits."""
        if count > 0:
            label = self.tenants.label(tenant)
            self._families[names.QUOTA_THROTTLED].labels(queue, label, reason).inc(count)

    def tenant_moved_to_lane(self, queue: str, tenant: str) -> None:
        """This worker moved a tenant to the queue's hot lane (the tenant is in the log line
        and the placement table, not a label)."""
        self._families[names.LANE_MOVES].labels(queue).inc()

    def lane_diverted(self, queue: str, count: int) -> None:
        """``count`` messages went from the queue's main topic to its hot lane."""
        if count > 0:
            self._families[names.LANE_DIVERTED].labels(queue).inc(count)

    def handler_process_restarted(self) -> None:
        """The handler process died and another was started."""
        self._families[names.HANDLER_PROCESS_RESTARTS].inc()

    def database_up(self, up: bool) -> None:
        """The worker reaches PostgreSQL (True) or has lost it (False)."""
        self._families[names.DATABASE_UP].set(1 if up else 0)

    def results_waiting(self, count: int) -> None:
        """``count`` writes wait for PostgreSQL (the poll thread, once per round: written
        only when it changed, as a multiprocess gauge's ``set`` is a locked file write)."""
        count = max(0, count)
        if count != self._results_waiting:
            self._results_waiting = count
            self._families[names.WORKER_RESULTS_WAITING].set(count)

    def committed_message_age(self, queue: str, seconds: float) -> None:
        """The message at the committed offset of ``queue`` was produced ``seconds`` ago."""
        self._families[names.COMMITTED_MESSAGE_AGE].labels(queue).set(_non_negative(seconds))


class _JobSeries:
    """The label children of each job class, looked up once: ``labels()`` costs a lock and a
    few tuples per call, and every job of a class asks for the same ones. Keyed by the
    tenant's label, not the tenant: the label set is bounded. The poll thread only (a miss
    under a race costs one more lookup, never a wrong series)."""

    def __init__(self, families: dict[str, Any], tenants: TenantLabeler) -> None:
        self._families = families
        self._tenants = tenants
        self._started: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._finished: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}

    def started(self, queue: str, job_type: str, tenant: str) -> tuple[Any, Any]:
        """(started counter, enqueue-to-start histogram) of one job class."""
        tenant_label = self._tenants.label(tenant)
        key = (queue, job_type, tenant_label)
        series = self._started.get(key)
        if series is None:
            series = self._started[key] = (
                self._families[names.JOBS_STARTED].labels(queue, job_type, tenant_label),
                self._families[names.ENQUEUE_TO_START].labels(queue, job_type),
            )
        return series

    def finished(
        self, queue: str, job_type: str, tenant: str, outcome: str
    ) -> tuple[Any, Any, Any]:
        """(finished counter, duration histogram, attempts-per-success histogram) of one job
        class and outcome."""
        tenant_label = self._tenants.label(tenant)
        key = (queue, job_type, tenant_label, outcome)
        series = self._finished.get(key)
        if series is None:
            if outcome not in JOB_OUTCOMES:
                raise ValueError(
                    f"unknown outcome {outcome!r}; expected one of {sorted(JOB_OUTCOMES)}"
                )
            series = self._finished[key] = (
                self._families[names.JOBS_FINISHED].labels(queue, job_type, tenant_label, outcome),
                self._families[names.JOB_DURATION].labels(queue, job_type, outcome),
                self._families[names.ATTEMPTS_PER_SUCCESS].labels(queue, job_type),
            )
        return series


def _build(spec: names.MetricSpec, registry: CollectorRegistry) -> MetricWrapperBase:
    if spec.kind == "counter":
        return Counter(spec.name, spec.help, spec.labels, registry=registry)
    if spec.kind == "histogram":
        return Histogram(spec.name, spec.help, spec.labels, registry=registry, buckets=spec.buckets)
    # A dead worker process's gauges leave the aggregate with it (the supervisor marks it dead).
    return Gauge(spec.name, spec.help, spec.labels, registry=registry, multiprocess_mode="liveall")
