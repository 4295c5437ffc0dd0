"""Every Prometheus metric tenantq exports: names, types, labels and help, in one place.

Four sources feed them:

* ``WorkerMetrics``: what a worker process observes as it runs jobs (durations, outcomes,
  retries, leases, utilization, dependencies, consumer lag), on an injectable registry.
* ``QueueStatsCollector`` (``tenantq.observability.queue_stats``): what Postgres says at scrape
  time (depth by state, oldest runnable age, live workers). Every worker that runs the
  collector reports the same numbers, so dashboards take ``max`` over instances for them,
  never ``sum``.
* the supervisor of a worker's processes: how often it had to start a member again.
* the console (``tenantq web``, on its own ``/metrics``): wrong tokens and refused sign-ins.

Names are constants here and nowhere else; ``SPECS`` lists them all, and a test checks that
the shipped dashboard and alert rules only use names from it. Tenant and error labels are
bounded (``tenantq.observability.labels``) so a scrape stays small whatever the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PREFIX = "tenantq_"

# -- from Postgres (QueueStatsCollector) -----------------------------------------------------
QUEUE_DEPTH = "tenantq_queue_depth"
OLDEST_RUNNABLE_AGE = "tenantq_oldest_runnable_age_seconds"
TENANT_OLDEST_RUNNABLE_AGE = "tenantq_tenant_oldest_runnable_age_seconds"
JOBS_DEAD_LAST_HOUR = "tenantq_jobs_dead_last_hour"
JOBS_SUCCEEDED_LAST_MINUTE = "tenantq_jobs_succeeded_last_minute"
CLUSTER_WORKERS = "tenantq_cluster_workers"
CLUSTER_SLOTS = "tenantq_cluster_slots"
CLUSTER_BUSY_SLOTS = "tenantq_cluster_busy_slots"
STATS_UP = "tenantq_stats_up"
STATS_QUERY_DURATION = "tenantq_stats_query_duration_seconds"
OUTBOX_LAG = "tenantq_outbox_lag_seconds"
LANE_TENANTS = "tenantq_lane_tenants"
TENANT_IN_LANE = "tenantq_tenant_in_lane"
OUTBOX_UNSENT = "tenantq_outbox_unsent_entries"
TENANT_RUNNING = "tenantq_tenant_running"
TENANT_MAX_RUNNING = "tenantq_tenant_max_running"

# -- from the worker (WorkerMetrics) ---------------------------------------------------------
JOBS_STARTED = "tenantq_jobs_started"
JOBS_FINISHED = "tenantq_jobs_finished"
JOB_DURATION = "tenantq_job_duration_seconds"
ENQUEUE_TO_START = "tenantq_enqueue_to_start_seconds"
READ_DELAY = "tenantq_read_delay_seconds"
ATTEMPTS_PER_SUCCESS = "tenantq_attempts_per_success"
RETRIES = "tenantq_retries"
DEAD_LETTERED = "tenantq_dead_lettered"
LEASE_EXPIRATIONS = "tenantq_lease_expirations"
LEASE_TAKEOVERS = "tenantq_lease_takeovers"
STALE_RESULTS_REFUSED = "tenantq_stale_results_refused"
WORKER_UTILIZATION = "tenantq_worker_utilization_ratio"
WORKER_BUSY_SLOTS = "tenantq_worker_busy_slots"
WORKER_SLOTS = "tenantq_worker_slots"
DEPENDENCY_LATENCY = "tenantq_dependency_latency_seconds"
DEPENDENCY_THROTTLES = "tenantq_dependency_throttles"
BREAKER_STATE = "tenantq_breaker_state"
CONSUMER_LAG = "tenantq_consumer_lag_messages"
COMMITTED_MESSAGE_AGE = "tenantq_committed_message_age_seconds"
DATABASE_UP = "tenantq_database_up"
LANE_MOVES = "tenantq_lane_moves"
LANE_DIVERTED = "tenantq_lane_diverted"
QUOTA_THROTTLED = "tenantq_quota_throttled"
HANDLER_PROCESS_RESTARTS = "tenantq_handler_process_restarts"
WORKER_RESULTS_WAITING = "tenantq_worker_results_waiting"

# -- from the supervisor ---------------------------------------------------------------------
WORKER_RESTARTS = "tenantq_worker_restarts"

# -- from the console ------------------------------------------------------------------------
WEB_LOGIN_FAILURES = "tenantq_web_login_failures"
WEB_LOGINS_REFUSED = "tenantq_web_logins_refused"

Kind = Literal["counter", "gauge", "histogram"]

# Jobs run from milliseconds (cache warm-up) to an hour (exports); buckets span both.
DURATION_BUCKETS: tuple[float, ...] = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    *(120, 300, 600, 1800, 3600),
)
# Waiting covers the retry tiers (5 s .. 30 min) and scheduled jobs past them.
WAIT_BUCKETS: tuple[float, ...] = (
    *(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    *(300, 900, 1800, 3600, 14400),
)
ATTEMPT_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50)
DEPENDENCY_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5),
    *(1, 2.5, 5, 10, 30),
)


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its name (without the ``_total`` a counter adds), type, labels."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    source: Literal["postgres", "worker", "supervisor", "console"] = "worker"

    def sample_names(self) -> frozenset[str]:
        """The names this family exposes on a scrape (what PromQL may refer to)."""
        if self.kind == "counter":
            return frozenset({f"{self.name}_total", f"{self.name}_created"})
        if self.kind == "histogram":
            suffixes = ("_bucket", "_sum", "_count", "_created")
            return frozenset(self.name + suffix for suffix in suffixes)
        return frozenset({self.name})


def _postgres(name: str, help_text: str, *labels: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help_text, labels, source="postgres")


SPECS: tuple[MetricSpec, ...] = (
    _postgres(
        QUEUE_DEPTH,
        "Unfinished jobs by queue, job type, tenant (top N, else other) and state.",
        "queue",
        "job_type",
        "tenant",
        "state",
    ),
    _postgres(
        OLDEST_RUNNABLE_AGE,
        "Seconds since the oldest due job of the queue could have run (0 when none waits). "
        "The headline signal: depth says how much, this says how late.",
        "queue",
    ),
    _postgres(
        TENANT_OLDEST_RUNNABLE_AGE,
        "Seconds since the oldest due job of the tenant could have run.",
        "queue",
        "tenant",
    ),
    _postgres(
        JOBS_DEAD_LAST_HOUR, "Jobs that died in the last hour.", "queue", "job_type", "tenant"
    ),
    _postgres(
        JOBS_SUCCEEDED_LAST_MINUTE,
        "Jobs that succeeded in the last minute (throughput per minute).",
        "queue",
        "job_type",
        "tenant",
    ),
    _postgres(CLUSTER_WORKERS, "Registered, not stopped workers by heartbeat status.", "status"),
    _postgres(CLUSTER_SLOTS, "Handler slots of the live workers."),
    _postgres(CLUSTER_BUSY_SLOTS, "Running jobs reported by the live workers."),
    _postgres(STATS_UP, "1 if the last stats query of Postgres succeeded, else 0."),
    _postgres(STATS_QUERY_DURATION, "Seconds the last stats query of Postgres took."),
    _postgres(
        OUTBOX_LAG,
        "Seconds since the oldest outbox entry not yet published was written (0 when none): "
        "how far the outbox relay is behind.",
        "queue",
    ),
    _postgres(OUTBOX_UNSENT, "Outbox entries committed and not yet published.", "queue"),
    _postgres(
        LANE_TENANTS, "Tenants in the queue's hot lane (moved by a worker or an operator).", "queue"
    ),
    _postgres(
        TENANT_IN_LANE,
        "1 for each tenant in the queue's hot lane (top N, else other: the count of the rest).",
        "queue",
        "tenant",
    ),
    _postgres(
        TENANT_RUNNING,
        "Attempts running now (live leases, any worker) of each tenant with limits of its own "
        "(top N by running, else other: their sum).",
        "tenant",
    ),
    _postgres(
        TENANT_MAX_RUNNING,
        "The tenant-wide cap of attempts running at once of each tenant listed in "
        "tenantq_tenant_running that has one.",
        "tenant",
    ),
    MetricSpec(JOBS_STARTED, "counter", "Attempts started.", ("queue", "job_type", "tenant")),
    MetricSpec(
        JOBS_FINISHED,
        "counter",
        "Attempts finished, by outcome.",
        ("queue", "job_type", "tenant", "outcome"),
    ),
    MetricSpec(
        JOB_DURATION,
        "histogram",
        "Handler run time of an attempt.",
        ("queue", "job_type", "outcome"),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        ENQUEUE_TO_START,
        "histogram",
        "Seconds from when a job was due (enqueued or run_after) to when an attempt started.",
        ("queue", "job_type"),
        WAIT_BUCKETS,
    ),
    MetricSpec(
        READ_DELAY,
        "histogram",
        "Seconds from a message's Kafka timestamp (its producer's clock) to the worker reading "
        "it, by source (main: the queue's topic; hot_lane: its hot lane, a flooding tenant's "
        "backlog): the part of enqueue-to-start spent in Kafka, the client's queue and the "
        "poll loop, before the job is claimed.",
        ("queue", "source"),
        WAIT_BUCKETS,
    ),
    MetricSpec(
        ATTEMPTS_PER_SUCCESS,
        "histogram",
        "Attempts a job needed to succeed.",
        ("queue", "job_type"),
        ATTEMPT_BUCKETS,
    ),
    MetricSpec(
        RETRIES, "counter", "Attempts scheduled to retry.", ("queue", "job_type", "error_class")
    ),
    MetricSpec(
        DEAD_LETTERED,
        "counter",
        "Jobs sent to the dead-letter topic.",
        ("queue", "job_type", "reason"),
    ),
    MetricSpec(LEASE_EXPIRATIONS, "counter", "Leases this worker lost by expiry.", ("queue",)),
    MetricSpec(LEASE_TAKEOVERS, "counter", "Expired leases of others taken over.", ("queue",)),
    MetricSpec(
        STALE_RESULTS_REFUSED,
        "counter",
        "Results the store refused because the attempt was no longer the lease holder's.",
        ("queue",),
    ),
    MetricSpec(WORKER_UTILIZATION, "gauge", "Busy handler slots divided by slots."),
    MetricSpec(WORKER_BUSY_SLOTS, "gauge", "Handler slots running a job."),
    MetricSpec(WORKER_SLOTS, "gauge", "Handler slots of this worker."),
    MetricSpec(
        DEPENDENCY_LATENCY,
        "histogram",
        "Seconds a call to a downstream dependency took.",
        ("dependency",),
        DEPENDENCY_BUCKETS,
    ),
    MetricSpec(
        DEPENDENCY_THROTTLES,
        "counter",
        "Calls throttled by a dependency (429) or by its local rate limit.",
        ("dependency",),
    ),
    MetricSpec(
        BREAKER_STATE, "gauge", "Circuit breaker: 0 closed, 1 open, 2 half open.", ("dependency",)
    ),
    MetricSpec(
        CONSUMER_LAG, "gauge", "Messages behind the log end, per partition.", ("topic", "partition")
    ),
    MetricSpec(
        COMMITTED_MESSAGE_AGE,
        "gauge",
        "Age of the message at the committed offset: how far behind the consumer commits.",
        ("queue",),
    ),
    MetricSpec(
        DATABASE_UP,
        "gauge",
        "1 while this worker reaches PostgreSQL, 0 while it does not (it then claims nothing "
        "and holds its results until the database is back).",
    ),
    MetricSpec(
        LANE_MOVES,
        "counter",
        "Tenants this worker moved to their queue's hot lane (they flooded a partition).",
        ("queue",),
    ),
    MetricSpec(
        LANE_DIVERTED,
        "counter",
        "Messages of hot-lane tenants this worker moved from the main topic to the lane.",
        ("queue",),
    ),
    MetricSpec(
        QUOTA_THROTTLED,
        "counter",
        "Jobs the claim held back for a limit of their tenant, by reason (max_running, rate, "
        "weight): not started, no attempt spent; each is asked for again (and counted again "
        "if held back again).",
        ("queue", "tenant", "reason"),
    ),
    MetricSpec(
        HANDLER_PROCESS_RESTARTS,
        "counter",
        "Handler processes that died (a handler killed it: os._exit, a segfault, the OOM "
        "killer) and were started again by their worker; the worker itself stays up.",
    ),
    MetricSpec(
        WORKER_RESULTS_WAITING,
        "gauge",
        "Results (and claims) of this worker waiting to be written to PostgreSQL: the outage "
        "buffer while the database is away, a few at most otherwise.",
    ),
    MetricSpec(
        WORKER_RESTARTS,
        "counter",
        "Worker processes that died and were started again by their supervisor.",
        source="supervisor",
    ),
    MetricSpec(
        WEB_LOGIN_FAILURES,
        "counter",
        "Wrong tokens presented to the console, by way: the sign-in form (login) or an "
        "Authorization header (bearer). A rise is someone guessing.",
        ("via",),
        source="console",
    ),
    MetricSpec(
        WEB_LOGINS_REFUSED,
        "counter",
        "Token checks the console refused unread (429) because too many wrong tokens came "
        "within a minute, by the limit reached: one client's (client) or everyone's (overall).",
        ("limit",),
        source="console",
    ),
)

SPECS_BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in SPECS}


def exported_sample_names() -> frozenset[str]:
    """Every sample name a tenantq scrape may contain."""
    return frozenset().union(*(spec.sample_names() for spec in SPECS))


__all__ = ["SPECS", "SPECS_BY_NAME", "MetricSpec", "exported_sample_names"]
