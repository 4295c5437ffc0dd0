"""index dead jobs by queue and finish time

Create Date: 2026-11-29 10:20:00
"""

from __future__ import annotations

from alembic import op

from tenantq.migrations.building_blocks import JOBS, create_partial_index

revision: str = "0002"
down_revision: str | None = "0001"


def upgrade() -> None:
    create_partial_index(
        "ix_tenantq_jobs_dead_recent", JOBS, ["queue", "finished_at"], "state = 'dead'"
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_jobs_dead_recent", table_name=JOBS)
