"""index dead jobs by queue and finish time

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 10:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_tenantq_jobs_dead_recent",
        "tenantq_jobs",
        ["queue", "finished_at"],
        unique=False,
        postgresql_where=sa.text("state = 'dead'"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_tenantq_jobs_dead_recent",
        table_name="tenantq_jobs",
        postgresql_where=sa.text("state = 'dead'"),
    )
