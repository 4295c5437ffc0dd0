"""job schema: jobs, attempts, workers, placement, replay audit

Create Date: 2026-11-29 09:15:42.591590
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenantq.migrations.building_blocks import (
    JOBS,
    WAITING,
    counter_column,
    create_partial_index,
    job_foreign_key,
    named_check,
    named_primary_key,
    not_negative,
    optional_times,
    stamped_column,
    text_columns,
)

revision: str = "0001"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        JOBS,
        sa.Column("id", sa.UUID(), nullable=False),
        *text_columns("queue", "job_type", "tenant_id", "partition_key"),
        sa.Column(
            "state",
            sa.Enum(
                "pending",
                "runnable",
                "leased",
                "succeeded",
                "retrying",
                "dead",
                "canceled",
                name="job_state",
            ),
            nullable=False,
        ),
        sa.Column("payload", sa.LargeBinary(), nullable=True),
        sa.Column("payload_sha256", sa.LargeBinary(), nullable=True),
        counter_column("attempts"),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        counter_column("replays"),
        stamped_column("run_after"),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        *optional_times("lease_until", "heartbeat_at"),
        sa.Column(
            "cancel_requested", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("last_error_class", sa.Text(), nullable=True),
        sa.Column("last_error_message", sa.Text(), nullable=True),
        sa.Column("progress", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("origin_topic", sa.Text(), nullable=True),
        sa.Column("origin_partition", sa.Integer(), nullable=True),
        sa.Column("origin_offset", sa.BigInteger(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        stamped_column("created_at"),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        stamped_column("updated_at"),
        *optional_times("started_at", "finished_at"),
        named_check(
            JOBS,
            "finished_exactly_when_terminal",
            "(finished_at IS NOT NULL) = (state IN ('canceled', 'dead', 'succeeded'))",
        ),
        named_check(
            JOBS,
            "lease_exactly_when_leased",
            "(state = 'leased') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)",
        ),
        not_negative(JOBS, "attempts"),
        named_check(JOBS, "tenant_id_length", "char_length(tenant_id) BETWEEN 1 AND 128"),
        named_check(JOBS, "max_attempts_positive", "max_attempts >= 1"),
        not_negative(JOBS, "replays"),
        named_primary_key(JOBS, "id"),
        sa.UniqueConstraint(
            "queue", "idempotency_key", name=op.f("uq_tenantq_jobs_queue_idempotency_key")
        ),
    )
    # Jobs churn: leave room on each page for HOT updates, and vacuum long before the default
    # 20 % of dead tuples.
    op.execute(
        "ALTER TABLE tenantq_jobs SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, "
        "autovacuum_analyze_scale_factor = 0.02)"
    )
    create_partial_index(
        "ix_tenantq_jobs_finished_at", JOBS, ["finished_at"], "finished_at IS NOT NULL"
    )
    create_partial_index("ix_tenantq_jobs_lease_owner", JOBS, ["lease_owner"], "state = 'leased'")
    op.create_index(
        "ix_tenantq_jobs_queue_tenant_state", JOBS, ["queue", "tenant_id", "state"], unique=False
    )
    create_partial_index("ix_tenantq_jobs_waiting", JOBS, ["queue", "run_after"], WAITING)
    op.create_table(
        "tenantq_replay_audit",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        stamped_column("at"),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("filter", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("matched", sa.Integer(), nullable=False),
        sa.Column("replayed", sa.Integer(), nullable=False),
        sa.Column("job_ids", postgresql.ARRAY(sa.UUID()), nullable=True),
        named_check("tenantq_replay_audit", "action_known", "action IN ('replay', 'purge')"),
        named_primary_key("tenantq_replay_audit", "id"),
    )
    op.create_table(
        "tenantq_tenant_placement",
        *text_columns("queue", "tenant_id"),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("shards", sa.Integer(), nullable=True),
        sa.Column("partitions", postgresql.ARRAY(sa.Integer()), nullable=True),
        stamped_column("updated_at"),
        sa.Column("updated_by", sa.Text(), nullable=True),
        named_check(
            "tenantq_tenant_placement",
            "pinned_has_partitions",
            "(mode = 'pinned') = (partitions IS NOT NULL AND cardinality(partitions) >= 1)",
        ),
        named_check(
            "tenantq_tenant_placement",
            "spread_has_shards",
            "(mode = 'spread') = (shards IS NOT NULL AND shards >= 2)",
        ),
        named_check(
            "tenantq_tenant_placement", "mode_known", "mode IN ('hashed', 'spread', 'pinned')"
        ),
        named_primary_key("tenantq_tenant_placement", "queue", "tenant_id"),
    )
    op.create_table(
        "tenantq_workers",
        *text_columns("id", "hostname"),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("queues", postgresql.ARRAY(sa.Text()), nullable=False),
        stamped_column("started_at"),
        stamped_column("heartbeat_at"),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        counter_column("running_jobs"),
        counter_column("slots"),
        named_primary_key("tenantq_workers", "id"),
    )
    op.create_table(
        "tenantq_job_attempts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("error_class", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        stamped_column("finished_at"),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        named_check(
            "tenantq_job_attempts",
            "outcome_known",
            "outcome IN ('succeeded', 'retrying', 'dead', 'canceled', 'released', 'snoozed', 'timeout', 'stale')",
        ),
        job_foreign_key("tenantq_job_attempts"),
        named_primary_key("tenantq_job_attempts", "id"),
    )
    op.create_index(
        "ix_tenantq_job_attempts_job_id_attempt",
        "tenantq_job_attempts",
        ["job_id", "attempt"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_job_attempts_job_id_attempt", table_name="tenantq_job_attempts")
    op.drop_table("tenantq_job_attempts")
    op.drop_table("tenantq_workers")
    op.drop_table("tenantq_tenant_placement")
    op.drop_table("tenantq_replay_audit")
    op.drop_index("ix_tenantq_jobs_waiting", table_name=JOBS)
    op.drop_index("ix_tenantq_jobs_queue_tenant_state", table_name=JOBS)
    op.drop_index("ix_tenantq_jobs_lease_owner", table_name=JOBS)
    op.drop_index("ix_tenantq_jobs_finished_at", table_name=JOBS)
    op.drop_table(JOBS)
    sa.Enum(name="job_state").drop(op.get_bind(), checkfirst=True)
