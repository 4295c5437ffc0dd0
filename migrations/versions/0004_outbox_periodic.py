"""outbox and periodic schedules: tenantq_outbox (transactional enqueue), tenantq_periodic

Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenantq.migrations.building_blocks import (
    job_foreign_key,
    named_primary_key,
    not_negative,
    stamped_column,
    text_columns,
)

revision: str = "0004"
down_revision: str | None = "0003"


def upgrade() -> None:
    op.create_table(
        "tenantq_outbox",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        *text_columns("queue", "main_topic"),
        sa.Column("job_id", sa.UUID(), nullable=False),
        *text_columns("tenant_id", "topic"),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=True),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("headers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=True),
        stamped_column("created_at", "clock_timestamp()"),
        not_negative("tenantq_outbox", "partition"),
        job_foreign_key("tenantq_outbox"),
        named_primary_key("tenantq_outbox", "id"),
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
        *text_columns("name", "job_type", "tenant_id", "queue", "schedule"),
        sa.Column("catch_up", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("next_tick", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_tick", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_id", sa.UUID(), nullable=True),
        stamped_column("created_at"),
        stamped_column("updated_at"),
        named_primary_key("tenantq_periodic", "name"),
    )


def downgrade() -> None:
    op.drop_table("tenantq_periodic")
    op.drop_index("ix_tenantq_outbox_job_id", table_name="tenantq_outbox")
    op.drop_index("ix_tenantq_outbox_main_topic_generation_id", table_name="tenantq_outbox")
    op.drop_table("tenantq_outbox")
