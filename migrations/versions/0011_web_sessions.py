"""console sign-ins as rows: tenantq_web_sessions, so that signing out ends a session

A console session was a signed cookie carrying its own expiry: signing out deleted the
browser's copy only, and a saved copy kept acting for the rest of its twelve hours. A session
is now a row keyed by the SHA-256 of the random id its cookie carries (the database never
holds a usable cookie); a request acts only while the row is there and unexpired, and signing
out deletes it, for every console process at once. Rows belong to a deployment (its topic
prefix), like everything a deployment keeps in a shared database.

Create Date: 2026-12-07 02:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenantq.migrations.building_blocks import stamped_column

revision: str = "0011"
down_revision: str | None = "0010"

TABLE = "tenantq_web_sessions"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id_sha256", sa.LargeBinary(), nullable=False),
        sa.Column("deployment", sa.Text(), nullable=False),
        sa.Column("user_name", sa.Text(), nullable=False),
        stamped_column("created_at"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "octet_length(id_sha256) = 32", name=op.f("ck_tenantq_web_sessions_id_is_a_sha256")
        ),
        sa.CheckConstraint(
            "expires_at > created_at", name=op.f("ck_tenantq_web_sessions_expires_after_start")
        ),
        sa.PrimaryKeyConstraint("id_sha256", name=op.f("pk_tenantq_web_sessions")),
    )
    op.create_index(
        "ix_tenantq_web_sessions_deployment_expires_at",
        TABLE,
        ["deployment", "expires_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_web_sessions_deployment_expires_at", table_name=TABLE)
    op.drop_table(TABLE)
