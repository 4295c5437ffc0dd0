"""The tables of tenantq, as SQLAlchemy Core metadata.

Alembic migrations (``tenantq.migrations``) build exactly this schema; a test compares the two.
Constraints carry the invariants of the state machine so that no bug in Python can store a job
that is, say, succeeded without a finish time or leased without an owner.

Deployments are namespaces (migration 0010): every table a deployment writes has a
``deployment`` column (the topic prefix), without a default, so a row cannot be written
without one; keys and unique indexes include it, and every index the statements search by
leads with it. ``tenantq_attempt_log`` has none: an attempt row belongs to its job's
deployment (job ids are unique across deployments, and every statement that writes one
checks that the job is its own).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Double,
    Enum,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from tenantq.states import TERMINAL_STATES, JobState, Outcome
from tenantq.tenant_limits import (
    JOB_TYPE_CHECK,
    MOST_BURST,
    MOST_RATE,
    MOST_RUNNING,
    MOST_WEIGHT,
    QUEUE_NAME_CHECK,
    TENANT_ID_CHECK,
    ThrottleReason,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

job_state = Enum(
    *[state.value for state in JobState],
    name="job_state",
    metadata=metadata,
    create_type=False,
)

_terminal_list = ", ".join(f"'{state.value}'" for state in sorted(TERMINAL_STATES))
_leasable_list = "'pending', 'runnable', 'retrying'"
#: Every attempt outcome, in declaration order (the order migration 0001 wrote them in).
_outcome_list = ", ".join(f"'{outcome.value}'" for outcome in Outcome)
_throttle_reasons = ", ".join(f"'{reason.value}'" for reason in ThrottleReason)


def _texts(*names: str) -> list[Column[Any]]:
    """A required text column of each name, in order."""
    return [Column(name, Text, nullable=False) for name in names]


def _counter(name: str, kind: Any = Integer) -> Column[Any]:
    """A count that starts at zero."""
    return Column(name, kind, nullable=False, server_default=text("0"))


def _stamped(name: str) -> Column[Any]:
    """A moment the database writes (``now()``) unless told one."""
    return Column(name, DateTime(timezone=True), nullable=False, server_default=func.now())


def _moments(*names: str) -> list[Column[Any]]:
    """A moment column of each name that stays empty until something happens."""
    return [Column(name, DateTime(timezone=True), nullable=True) for name in names]


def _limits() -> list[Column[Any]]:
    """A running cap, a start rate and its burst, each NULL when not limited."""
    return [
        Column("max_running", Integer, nullable=True),
        Column("rate", Double, nullable=True),
        Column("burst", Integer, nullable=True),
    ]


jobs = Table(
    "tenantq_jobs",
    metadata,
    # The primary key is the id alone, across deployments: a message of one deployment that
    # carries another's job id is a conflict the claim refuses, never a second row.
    Column("id", UUID(as_uuid=True), primary_key=True),
    *_texts("deployment", "queue", "job_type", "tenant_id", "partition_key"),
    Column("state", job_state, nullable=False),
    # The encoded payload and its hash: for replay, and to tell a duplicate from a conflict.
    Column("payload", LargeBinary, nullable=True),
    Column("payload_sha256", LargeBinary, nullable=True),
    # attempts is incremented when a lease is taken; the attempt number is the fencing token.
    _counter("attempts"),
    Column("max_attempts", Integer, nullable=False),
    _counter("replays"),
    # Process deaths the job was running in (worker or handler process): see Outcome.CRASHED.
    _counter("crashes"),
    _stamped("run_after"),
    Column("lease_owner", Text, nullable=True),
    *_moments("lease_until", "heartbeat_at"),
    Column("cancel_requested", Boolean, nullable=False, server_default=text("false")),
    Column("last_error_class", Text, nullable=True),
    Column("last_error_message", Text, nullable=True),
    Column("progress", JSONB, nullable=True),
    Column("origin_topic", Text, nullable=True),
    Column("origin_partition", Integer, nullable=True),
    Column("origin_offset", BigInteger, nullable=True),
    Column("idempotency_key", Text, nullable=True),
    _stamped("created_at"),
    Column("enqueued_at", DateTime(timezone=True), nullable=True),
    _stamped("updated_at"),
    *_moments("started_at", "finished_at"),
    # The attempt that succeeded, written by the result that ended the job (migration 0008):
    # its worker, when its lease was taken (database clock) and how long its handler ran.
    # Every other attempt is a row of ``tenantq_attempt_log``.
    Column("success_worker_id", Text, nullable=True),
    Column("success_started_at", DateTime(timezone=True), nullable=True),
    Column("success_duration_ms", Integer, nullable=True),
    CheckConstraint("attempts >= 0", name="attempts_not_negative"),
    CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
    CheckConstraint("replays >= 0", name="replays_not_negative"),
    CheckConstraint("crashes >= 0", name="crashes_not_negative"),
    CheckConstraint(
        f"(finished_at IS NOT NULL) = (state IN ({_terminal_list}))",
        name="finished_exactly_when_terminal",
    ),
    CheckConstraint(
        "(state = 'leased') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)",
        name="lease_exactly_when_leased",
    ),
    CheckConstraint("char_length(tenant_id) BETWEEN 1 AND 128", name="tenant_id_length"),
    CheckConstraint(
        "success_worker_id IS NULL OR state = 'succeeded'", name="success_only_when_succeeded"
    ),
    # An idempotency key names one job per deployment and queue; jobs without a key have no
    # entry.
    Index(
        "uq_tenantq_jobs_deployment_queue_idempotency_key",
        "deployment",
        "queue",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
    # Oldest runnable job per queue (the headline metric) and due retries.
    Index(
        "ix_tenantq_jobs_waiting",
        "deployment",
        "queue",
        "run_after",
        postgresql_where=text(f"state IN ({_leasable_list})"),
    ),
    # The leased jobs: by tenant, what a tenant runs now (the quota claim counts them, and
    # stats); by owner, what a crashed worker held (migration 0013: the owner after the
    # tenant, so that one index serves both and a claim enters one, not two).
    Index(
        "ix_tenantq_jobs_leased",
        "deployment",
        "tenant_id",
        "lease_owner",
        postgresql_where=text("state = 'leased'"),
    ),
    # Stats of the waiting jobs by queue/tenant/state. Not of the leased ones (migration
    # 0009): every claim inserted an entry here, a sixth of its Postgres time, for a stats
    # query that finds the leased jobs, a worker's slots' worth, by the owner index.
    Index(
        "ix_tenantq_jobs_queue_tenant_state",
        "deployment",
        "queue",
        "tenant_id",
        "state",
        postgresql_where=text(f"state IN ({_leasable_list})"),
    ),
    Index(
        "ix_tenantq_jobs_finished_at",
        "deployment",
        "finished_at",
        postgresql_where=text("finished_at IS NOT NULL"),
    ),
    # "Dead in the last hour" per queue (stats, alerts) without scanning every finished job.
    Index(
        "ix_tenantq_jobs_dead_recent",
        "deployment",
        "queue",
        "finished_at",
        postgresql_where=text("state = 'dead'"),
    ),
)

#: Every attempt that did not succeed (and any written by a release before migration 0008),
#: a row each. A succeeded attempt is recorded on its job row (``success_*``); the view
#: ``tenantq_job_attempts`` (migration 0008, not modelled here) shows both as one history.
attempt_log = Table(
    "tenantq_attempt_log",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    # No foreign key to the job (migration 0007): the statements that write attempt rows
    # keep them to existing jobs, and retention deletes them with their jobs.
    Column("job_id", UUID(as_uuid=True), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("worker_id", Text, nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("error_class", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    _stamped("finished_at"),
    Column("duration_ms", Integer, nullable=True),
    CheckConstraint(f"outcome IN ({_outcome_list})", name="outcome_known"),
    Index("ix_tenantq_attempt_log_job_id_attempt", "job_id", "attempt"),
)

workers = Table(
    "tenantq_workers",
    metadata,
    *_texts("deployment", "id", "hostname"),
    Column("pid", Integer, nullable=False),
    Column("queues", ARRAY(Text), nullable=False),
    _stamped("started_at"),
    _stamped("heartbeat_at"),
    Column("stopped_at", DateTime(timezone=True), nullable=True),
    _counter("running_jobs"),
    _counter("slots"),
    PrimaryKeyConstraint("deployment", "id"),
)

tenant_placement = Table(
    "tenantq_tenant_placement",
    metadata,
    *_texts("deployment", "queue", "tenant_id"),
    Column("mode", String(16), nullable=False),
    Column("shards", Integer, nullable=True),
    Column("partitions", ARRAY(Integer), nullable=True),
    _stamped("updated_at"),
    Column("updated_by", Text, nullable=True),
    # Why the tenant is where it is (the hot lane says what a worker saw).
    Column("reason", Text, nullable=True),
    # Placed by a worker (the hot lane), not an operator: a worker may take it back.
    Column("automatic", Boolean, nullable=False, server_default=text("false")),
    PrimaryKeyConstraint("deployment", "queue", "tenant_id"),
    CheckConstraint("mode IN ('hashed', 'spread', 'pinned', 'lane')", name="mode_known"),
    CheckConstraint(
        "(mode = 'spread') = (shards IS NOT NULL AND shards >= 2)", name="spread_has_shards"
    ),
    CheckConstraint(
        "(mode = 'pinned') = (partitions IS NOT NULL AND cardinality(partitions) >= 1)",
        name="pinned_has_partitions",
    ),
)

replay_audit = Table(
    "tenantq_replay_audit",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    *_texts("deployment", "actor"),
    _stamped("at"),
    Column("queue", Text, nullable=False),
    Column("action", String(16), nullable=False),
    Column("filter", JSONB, nullable=False),
    Column("dry_run", Boolean, nullable=False),
    Column("matched", Integer, nullable=False),
    Column("replayed", Integer, nullable=False),
    Column("job_ids", ARRAY(UUID(as_uuid=True)), nullable=True),
    CheckConstraint("action IN ('replay', 'purge')", name="action_known"),
    # The DLQ page's latest rows of its deployment.
    Index("ix_tenantq_replay_audit_deployment_id", "deployment", "id"),
)

#: The transactional outbox: a job enqueued inside the caller's transaction
#: (``tenantq.Outbox``) waits here, as the exact Kafka record the producer would write, until
#: the relay of its queue has published it; then the entry is deleted (the job row is the
#: record). ``generation`` is stamped by the relay when it first sees a committed entry, so
#: entries publish in commit order (generation) and insert order within one (id). An entry
#: written by the SQL function ``tenantq_enqueue`` (migration 0012) has no record yet (topic,
#: partition, value, headers all NULL): its relay encodes it from the job row first.
outbox = Table(
    "tenantq_outbox",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    *_texts("deployment", "queue"),
    # The queue's main topic names the relay that owns the entry (prefix + queue).
    Column("main_topic", Text, nullable=False),
    Column(
        "job_id",
        UUID(as_uuid=True),
        ForeignKey("tenantq_jobs.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("tenant_id", Text, nullable=False),
    Column("topic", Text, nullable=True),
    Column("partition", Integer, nullable=True),
    Column("key", LargeBinary, nullable=True),
    Column("value", LargeBinary, nullable=True),
    Column("headers", JSONB, nullable=True),
    Column("generation", BigInteger, nullable=True),
    # The insert's own clock, not the transaction's start: lag counts from the write.
    Column(
        "created_at",
        DateTime(timezone=True),
        nullable=False,
        server_default=text("clock_timestamp()"),
    ),
    CheckConstraint("partition >= 0", name="partition_not_negative"),
    CheckConstraint(
        "num_nulls(topic, partition, value, headers) IN (0, 4)", name="record_whole_or_absent"
    ),
    # The relay's read: unstamped entries, then by generation and id, per main topic.
    Index(
        "ix_tenantq_outbox_deployment_main_topic_generation_id",
        "deployment",
        "main_topic",
        "generation",
        "id",
    ),
    # Deleting a job (retention) deletes its unsent entry without scanning the outbox.
    Index("ix_tenantq_outbox_job_id", "job_id"),
)

#: The queues a relay of a deployment serves, registered by the relay when it connects, with
#: the settings ``tenantq_enqueue`` (migration 0012) checks and writes by: a queue without a
#: row has no relay that would publish what the function writes, and is refused.
outbox_queues = Table(
    "tenantq_outbox_queues",
    metadata,
    *_texts("deployment", "queue", "main_topic"),
    Column("max_payload_bytes", Integer, nullable=False),
    Column("max_message_bytes", Integer, nullable=False),
    # The pending row's max_attempts until a worker's first lease sets its job type's.
    Column("default_max_attempts", Integer, nullable=False),
    _stamped("registered_at"),
    PrimaryKeyConstraint("deployment", "queue"),
    CheckConstraint("max_payload_bytes > 0 AND max_message_bytes > 0", name="limits_positive"),
    CheckConstraint("default_max_attempts >= 1", name="default_max_attempts_positive"),
)

#: One row per periodic schedule (``app.periodic``): the tick last enqueued and the next one.
#: Schedulers in every worker advance ``next_tick`` by compare-and-set, in the transaction
#: that enqueues the tick's job through the outbox, so one tick makes one job.
periodic_schedules = Table(
    "tenantq_periodic",
    metadata,
    *_texts("deployment", "name", "job_type", "tenant_id", "queue"),
    # "every 2s" or "cron 0 3 * * *": a changed schedule restarts from now.
    Column("schedule", Text, nullable=False),
    Column("catch_up", Boolean, nullable=False, server_default=text("false")),
    Column("next_tick", DateTime(timezone=True), nullable=False),
    Column("last_tick", DateTime(timezone=True), nullable=True),
    Column("last_job_id", UUID(as_uuid=True), nullable=True),
    _stamped("created_at"),
    _stamped("updated_at"),
    PrimaryKeyConstraint("deployment", "name"),
)

#: Console sign-ins (``tenantq web``): a session acts while its row is here and unexpired;
#: signing out deletes it. The key is the SHA-256 of the random id the cookie carries, so the
#: table never holds a usable cookie.
web_sessions = Table(
    "tenantq_web_sessions",
    metadata,
    Column("id_sha256", LargeBinary, primary_key=True),
    *_texts("deployment", "user_name"),
    _stamped("created_at"),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("octet_length(id_sha256) = 32", name="id_is_a_sha256"),
    CheckConstraint("expires_at > created_at", name="expires_after_start"),
    # Expired sign-ins of a deployment are deleted at the next sign-in.
    Index("ix_tenantq_web_sessions_deployment_expires_at", "deployment", "expires_at"),
)

#: A tenant's limits, set by operators (``tenantq tenants set``, ``tenantq.Tenants``, the
#: console): the most it runs at once and starts per second, fleet-wide, and its weight when
#: tenants compete for a queue. ``queue`` and ``job_type`` narrow a row ('*' = any); every
#: row that applies to a job must hold. The claim enforces them (``tenantq.store.quotas``).
tenants = Table(
    "tenantq_tenants",
    metadata,
    *_texts("deployment", "tenant_id", "queue", "job_type"),
    *_limits(),
    Column("weight", Integer, nullable=True),
    _stamped("updated_at"),
    Column("updated_by", Text, nullable=True),
    PrimaryKeyConstraint("deployment", "tenant_id", "queue", "job_type"),
    CheckConstraint(f"tenant_id ~ '{TENANT_ID_CHECK}'", name="tenant_id_valid"),
    CheckConstraint(f"queue = '*' OR queue ~ '{QUEUE_NAME_CHECK}'", name="queue_valid"),
    CheckConstraint(f"job_type = '*' OR job_type ~ '{JOB_TYPE_CHECK}'", name="job_type_valid"),
    CheckConstraint(f"max_running BETWEEN 1 AND {MOST_RUNNING}", name="max_running_in_range"),
    # NaN and infinity are refused too: NaN is above every number in PostgreSQL.
    CheckConstraint(f"rate > 0 AND rate <= {MOST_RATE:.0f}", name="rate_in_range"),
    CheckConstraint(f"burst BETWEEN 1 AND {MOST_BURST}", name="burst_in_range"),
    CheckConstraint("burst IS NULL OR rate IS NOT NULL", name="burst_needs_a_rate"),
    CheckConstraint(f"weight BETWEEN 1 AND {MOST_WEIGHT}", name="weight_in_range"),
    # Weights share a queue between tenants; a job type has no share of its own.
    CheckConstraint("weight IS NULL OR job_type = '*'", name="weight_per_queue"),
    CheckConstraint(
        "max_running IS NOT NULL OR rate IS NOT NULL OR weight IS NOT NULL",
        name="limits_something",
    ),
)

#: What the claim keeps of each cap's and rate's use (rows of workers, never of operators),
#: one row per scope a cap or a rate applies to (a row of ``tenantq_tenants``, or the
#: defaults' tenant-wide one): the limits the last claim applied, what it asked for and let
#: start, and the state that carries from claim to claim. Every claim of a capped or paced
#: tenant updates the rows of its scopes under their row locks
#: (``tenantq.store.quota_claim``).
tenant_usage = Table(
    "tenantq_tenant_usage",
    metadata,
    *_texts("deployment", "queue", "tenant_id", "job_type"),
    # Claims that wrote the row: a claim trusts a count it made only if none wrote since.
    _counter("claims", BigInteger),
    # What the last claim asked to start and let start.
    _counter("wanted"),
    _counter("granted"),
    # The limits the last claim applied.
    *_limits(),
    # At least as many of the scope's jobs as run now: raised by every start let through,
    # brought down to a count of the live leases when it leaves less room than wanted.
    Column("running_bound", Integer, nullable=True),
    # The live leases the last claim counted (NULL: it did not need to).
    Column("counted", Integer, nullable=True),
    # GCRA: when the scope's next start is due at the steady rate; up to burst - 1 intervals
    # of it may be spent early.
    *_moments("rate_tat", "throttled_at"),
    Column("throttled_reason", Text, nullable=True),
    _stamped("updated_at"),
    PrimaryKeyConstraint("deployment", "queue", "tenant_id", "job_type"),
    CheckConstraint("claims >= 0", name="claims_not_negative"),
    CheckConstraint("granted BETWEEN 0 AND wanted", name="granted_within_wanted"),
    CheckConstraint("running_bound >= 0", name="running_bound_not_negative"),
    CheckConstraint("counted >= 0", name="counted_not_negative"),
    CheckConstraint(f"throttled_reason IN ({_throttle_reasons})", name="throttled_reason_known"),
)

#: Each tenant's share of a fair queue (a queue where some tenant has a weight of its own):
#: its virtual time (its starts divided by its weight), which every worker adds its starts to
#: and reads the others' from, every tenth of a second (``tenantq.quotas.shares``).
tenant_shares = Table(
    "tenantq_tenant_shares",
    metadata,
    *_texts("deployment", "queue", "tenant_id"),
    # The weight the last claim applied.
    Column("weight", Integer, nullable=False),
    Column("virtual_time", Double, nullable=False, server_default=text("0")),
    # The slowest backlogged competitor's virtual time, as the last worker to write saw it.
    Column("floor_time", Double, nullable=True),
    # When a worker last held more of the tenant than it could start (it competes).
    Column("backlogged_at", DateTime(timezone=True), nullable=True),
    # When its share last held one of its jobs back.
    Column("throttled_at", DateTime(timezone=True), nullable=True),
    _stamped("updated_at"),
    PrimaryKeyConstraint("deployment", "queue", "tenant_id"),
    CheckConstraint(f"weight BETWEEN 1 AND {MOST_WEIGHT}", name="weight_in_range"),
)
