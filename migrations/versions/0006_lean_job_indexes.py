"""lean job indexes: only keyed jobs in the idempotency index, only unfinished ones by tenant

Every state change of a job is a new row version in every index of its table (the state is
indexed, so no update is HOT). Two indexes held entries nobody looks up: the unique index on
(queue, idempotency_key) held a NULL entry for every job without a key, and the index by
(queue, tenant, state) held every finished job, which the stats read through finished_at.

Create Date: 2026-12-01 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenantq.migrations.building_blocks import JOBS, UNFINISHED, create_partial_index

revision: str = "0006"
down_revision: str | None = "0005"

KEYED = "idempotency_key IS NOT NULL"


def upgrade() -> None:
    op.drop_constraint("uq_tenantq_jobs_queue_idempotency_key", JOBS, type_="unique")
    op.create_index(
        "uq_tenantq_jobs_queue_idempotency_key",
        JOBS,
        ["queue", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text(KEYED),
    )
    op.drop_index("ix_tenantq_jobs_queue_tenant_state", table_name=JOBS)
    create_partial_index(
        "ix_tenantq_jobs_queue_tenant_state", JOBS, ["queue", "tenant_id", "state"], UNFINISHED
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_jobs_queue_tenant_state", table_name=JOBS)
    op.create_index("ix_tenantq_jobs_queue_tenant_state", JOBS, ["queue", "tenant_id", "state"])
    op.drop_index("uq_tenantq_jobs_queue_idempotency_key", table_name=JOBS)
    op.create_unique_constraint(
        "uq_tenantq_jobs_queue_idempotency_key", JOBS, ["queue", "idempotency_key"]
    )
