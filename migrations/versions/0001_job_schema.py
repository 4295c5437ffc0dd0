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
    create_partial_index,
    job_foreign_key,
    stamped_column,
)

revision: str = "0001"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        JOBS,
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("partition_key", sa.Text(), nullable=False),
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
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("replays", sa.Integer(), server_default=sa.text("0"), nullable=False),
        stamped_column("run_after"),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
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
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(finished_at IS NOT NULL) = (state IN ('canceled', 'dead', 'succeeded'))",
            name=op.f("ck_tenantq_jobs_finished_exactly_when_terminal"),
        ),
        sa.CheckConstraint(
            "(state = 'leased') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)",
            name=op.f("ck_tenantq_jobs_lease_exactly_when_leased"),
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_tenantq_jobs_attempts_not_negative")),
        sa.CheckConstraint(
            "char_length(tenant_id) BETWEEN 1 AND 128",
            name=op.f("ck_tenantq_jobs_tenant_id_length"),
        ),
        sa.CheckConstraint("max_attempts >= 1", name=op.f("ck_tenantq_jobs_max_attempts_positive")),
        sa.CheckConstraint("replays >= 0", name=op.f("ck_tenantq_jobs_replays_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenantq_jobs")),
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
        sa.CheckConstraint(
            "action IN ('replay', 'purge')", name=op.f("ck_tenantq_replay_audit_action_known")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenantq_replay_audit")),
    )
    op.create_table(
        "tenantq_tenant_placement",
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("shards", sa.Integer(), nullable=True),
        sa.Column("partitions", postgresql.ARRAY(sa.Integer()), nullable=True),
        stamped_column("updated_at"),
        sa.Column("updated_by", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "(mode = 'pinned') = (partitions IS NOT NULL AND cardinality(partitions) >= 1)",
            name=op.f("ck_tenantq_tenant_placement_pinned_has_partitions"),
        ),
        sa.CheckConstraint(
            "(mode = 'spread') = (shards IS NOT NULL AND shards >= 2)",
            name=op.f("ck_tenantq_tenant_placement_spread_has_shards"),
        ),
        sa.CheckConstraint(
            "mode IN ('hashed', 'spread', 'pinned')",
            name=op.f("ck_tenantq_tenant_placement_mode_known"),
        ),
        sa.PrimaryKeyConstraint("queue", "tenant_id", name=op.f("pk_tenantq_tenant_placement")),
    )
    op.create_table(
        "tenantq_workers",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("queues", postgresql.ARRAY(sa.Text()), nullable=False),
        stamped_column("started_at"),
        stamped_column("heartbeat_at"),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("running_jobs", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("slots", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenantq_workers")),
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
        sa.CheckConstraint(
            "outcome IN ('succeeded', 'retrying', 'dead', 'canceled', 'released', 'snoozed', 'timeout', 'stale')",
            name=op.f("ck_tenantq_job_attempts_outcome_known"),
        ),
        job_foreign_key("tenantq_job_attempts"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenantq_job_attempts")),
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
