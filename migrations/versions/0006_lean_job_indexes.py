"""lean job indexes: only keyed jobs in the idempotency index, only unfinished ones by tenant

Every state change of a job is a new row version in every index of its table (the state is
indexed, so no update is HOT). Two indexes held entries nobody looks up: the unique index on
(queue, idempotency_key) held a NULL entry for every job without a key, and the index by
(queue, tenant, state) held every finished job, which the stats read through finished_at.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "tenantq_jobs"
KEYED = "idempotency_key IS NOT NULL"
UNFINISHED = "state IN ('pending', 'runnable', 'leased', 'retrying')"


def upgrade() -> None:
    op.drop_constraint("uq_tenantq_jobs_queue_idempotency_key", TABLE, type_="unique")
    op.create_index(
        "uq_tenantq_jobs_queue_idempotency_key",
        TABLE,
        ["queue", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text(KEYED),
    )
    op.drop_index("ix_tenantq_jobs_queue_tenant_state", table_name=TABLE)
    op.create_index(
        "ix_tenantq_jobs_queue_tenant_state",
        TABLE,
        ["queue", "tenant_id", "state"],
        postgresql_where=sa.text(UNFINISHED),
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_jobs_queue_tenant_state", table_name=TABLE)
    op.create_index("ix_tenantq_jobs_queue_tenant_state", TABLE, ["queue", "tenant_id", "state"])
    op.drop_index("uq_tenantq_jobs_queue_idempotency_key", table_name=TABLE)
    op.create_unique_constraint(
        "uq_tenantq_jobs_queue_idempotency_key", TABLE, ["queue", "idempotency_key"]
    )
