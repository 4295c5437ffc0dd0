"""the index by (queue, tenant, state) holds the waiting jobs only, not the leased ones

Every claim inserts its jobs as leased rows, and each row entered this index: measured on
the claim statement at 500 jobs per batch, 8.8 us of Postgres per job with the entry and 7.3
without it, a sixth of the claim. The index serves the stats by tenant (``tenantq stats``,
the console, the busiest tenants a worker labels first); their leased jobs, a worker's slots'
worth at most, are found through ``ix_tenantq_jobs_lease_owner`` (leased rows only), as the
statement's leased branch already reads them.

Create Date: 2026-12-06 22:00:00
"""

from __future__ import annotations

from alembic import op

from tenantq.migrations.building_blocks import JOBS, UNFINISHED, WAITING, create_partial_index

revision: str = "0009"
down_revision: str | None = "0008"

INDEX = "ix_tenantq_jobs_queue_tenant_state"


def _index_on(predicate: str) -> None:
    op.drop_index(INDEX, table_name=JOBS)
    create_partial_index(INDEX, JOBS, ["queue", "tenant_id", "state"], predicate)


def upgrade() -> None:
    _index_on(WAITING)


def downgrade() -> None:
    _index_on(UNFINISHED)
