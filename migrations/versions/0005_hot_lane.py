"""hot lane: a placement mode 'lane', why a tenant is there, and whether a worker put it there

Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"

TABLE = "tenantq_tenant_placement"
#: Used through op.f() inside the steps: ``op`` only exists while Alembic runs a migration.
CHECK = "ck_tenantq_tenant_placement_mode_known"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("reason", sa.Text(), nullable=True))
    op.add_column(
        TABLE,
        sa.Column("automatic", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.drop_constraint(op.f(CHECK), TABLE, type_="check")
    op.create_check_constraint(op.f(CHECK), TABLE, "mode IN ('hashed', 'spread', 'pinned', 'lane')")


def downgrade() -> None:
    op.execute("DELETE FROM tenantq_tenant_placement WHERE mode = 'lane'")
    op.drop_constraint(op.f(CHECK), TABLE, type_="check")
    op.create_check_constraint(op.f(CHECK), TABLE, "mode IN ('hashed', 'spread', 'pinned')")
    op.drop_column(TABLE, "automatic")
    op.drop_column(TABLE, "reason")
