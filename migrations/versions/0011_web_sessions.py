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

from tenantq.migrations.building_blocks import (
    named_check,
    named_primary_key,
    stamped_column,
    text_columns,
)

revision: str = "0011"
down_revision: str | None = "0010"

TABLE = "tenantq_web_sessions"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id_sha256", sa.LargeBinary(), nullable=False),
        *text_columns("deployment", "user_name"),
        stamped_column("created_at"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        named_check(TABLE, "id_is_a_sha256", "octet_length(id_sha256) = 32"),
        named_check(TABLE, "expires_after_start", "expires_at > created_at"),
        named_primary_key(TABLE, "id_sha256"),
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
