"""crash accounting: jobs count the process deaths they were part of; attempts may end crashed

Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"

OUTCOMES_BEFORE = (
    "'succeeded', 'retrying', 'dead', 'canceled', 'released', 'snoozed', 'timeout', 'stale'"
)
OUTCOMES_AFTER = OUTCOMES_BEFORE + ", 'crashed'"


def upgrade() -> None:
    op.add_column(
        "tenantq_jobs",
        sa.Column("crashes", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.create_check_constraint(
        op.f("ck_tenantq_jobs_crashes_not_negative"), "tenantq_jobs", "crashes >= 0"
    )
    op.drop_constraint(
        op.f("ck_tenantq_job_attempts_outcome_known"), "tenantq_job_attempts", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_tenantq_job_attempts_outcome_known"),
        "tenantq_job_attempts",
        f"outcome IN ({OUTCOMES_AFTER})",
    )


def downgrade() -> None:
    op.drop_constraint(
        op.f("ck_tenantq_job_attempts_outcome_known"), "tenantq_job_attempts", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_tenantq_job_attempts_outcome_known"),
        "tenantq_job_attempts",
        f"outcome IN ({OUTCOMES_BEFORE})",
    )
    op.drop_constraint(op.f("ck_tenantq_jobs_crashes_not_negative"), "tenantq_jobs", type_="check")
    op.drop_column("tenantq_jobs", "crashes")
