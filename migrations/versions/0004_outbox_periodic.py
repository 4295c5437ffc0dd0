"""outbox and periodic schedules: tenantq_outbox (transactional enqueue), tenantq_periodic

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tenantq_outbox",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("main_topic", sa.Text(), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=True),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("headers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.CheckConstraint("partition >= 0", name=op.f("ck_tenantq_outbox_partition_not_negative")),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["tenantq_jobs.id"],
            name=op.f("fk_tenantq_outbox_job_id_tenantq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenantq_outbox")),
    )
    op.create_index(
        "ix_tenantq_outbox_main_topic_generation_id",
        "tenantq_outbox",
        ["main_topic", "generation", "id"],
        unique=False,
    )
    op.create_index("ix_tenantq_outbox_job_id", "tenantq_outbox", ["job_id"], unique=False)
    op.create_table(
        "tenantq_periodic",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("catch_up", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("next_tick", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_tick", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_id", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_tenantq_periodic")),
    )


def downgrade() -> None:
    op.drop_table("tenantq_periodic")
    op.drop_index("ix_tenantq_outbox_job_id", table_name="tenantq_outbox")
    op.drop_index("ix_tenantq_outbox_main_topic_generation_id", table_name="tenantq_outbox")
    op.drop_table("tenantq_outbox")
