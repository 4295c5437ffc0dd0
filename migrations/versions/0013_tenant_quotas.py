"""tenant quotas: tenantq_tenants (operators' limits), tenantq_tenant_usage and _shares (the claim's)

A tenant's running cap, start rate and weight live in ``tenantq_tenants``, one row per
(deployment, tenant, queue or '*', job type or '*'), with a CHECK for each bound. The claim
enforces them where leases are taken, across every worker: per cap or rate it updates a row
of ``tenantq_tenant_usage`` under its lock (what may run, by a bound counted down to the live
leases when needed, and the start rate's GCRA time); per tenant of a queue shared by weight, a
row of ``tenantq_tenant_shares`` (its virtual time).

The leased jobs' index leads with the tenant after the deployment: the claim counts a
tenant's live leases through it. It replaces the index by owner (``ix_tenantq_jobs_
lease_owner``), whose statements (a crashed worker's leases) now find their rows through
the owner as its last column; a claim enters one leased index, as before, not two.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-09 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from tenantq.migrations.building_blocks import (
    counter_column,
    in_range,
    named_check,
    named_primary_key,
    not_negative,
    optional_integers,
    optional_times,
    stamped_column,
    text_columns,
)

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JOBS = "tenantq_jobs"
LEASED = "state = 'leased'"
TENANTS = "tenantq_tenants"
USAGE = "tenantq_tenant_usage"
SHARES = "tenantq_tenant_shares"

# The bounds as they are today, written out: a migration must build the same table however
# the code's constants move later.
TENANT_ID = "^[A-Za-z0-9._:-]{1,128}$"
QUEUE_NAME = "^[A-Za-z0-9_-]{1,64}$"
JOB_TYPE = "^[A-Za-z0-9_.:-]{1,128}$"


def _limit_columns() -> list[sa.Column[Any]]:
    """A running cap, a start rate and its burst, each NULL when not limited: as operators
    set them (``tenantq_tenants``), and as the last claim applied them (``_usage``)."""
    return [
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("rate", sa.Double(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        TENANTS,
        *text_columns("deployment", "tenant_id", "queue", "job_type"),
        *_limit_columns(),
        sa.Column("weight", sa.Integer(), nullable=True),
        stamped_column("updated_at"),
        sa.Column("updated_by", sa.Text(), nullable=True),
        named_check(TENANTS, "tenant_id_valid", f"tenant_id ~ '{TENANT_ID}'"),
        named_check(TENANTS, "queue_valid", f"queue = '*' OR queue ~ '{QUEUE_NAME}'"),
        named_check(TENANTS, "job_type_valid", f"job_type = '*' OR job_type ~ '{JOB_TYPE}'"),
        in_range(TENANTS, "max_running", 1, 1_000_000),
        named_check(TENANTS, "rate_in_range", "rate > 0 AND rate <= 1000000"),
        in_range(TENANTS, "burst", 1, 1_000_000),
        named_check(TENANTS, "burst_needs_a_rate", "burst IS NULL OR rate IS NOT NULL"),
        in_range(TENANTS, "weight", 1, 1000),
        named_check(TENANTS, "weight_per_queue", "weight IS NULL OR job_type = '*'"),
        named_check(
            TENANTS,
            "limits_something",
            "max_running IS NOT NULL OR rate IS NOT NULL OR weight IS NOT NULL",
        ),
        named_primary_key(TENANTS, "deployment", "tenant_id", "queue", "job_type"),
    )
    op.create_table(
        USAGE,
        *text_columns("deployment", "queue", "tenant_id", "job_type"),
        counter_column("claims", sa.BigInteger),
        counter_column("wanted"),
        counter_column("granted"),
        *_limit_columns(),
        *optional_integers("running_bound", "counted"),
        *optional_times("rate_tat", "throttled_at"),
        sa.Column("throttled_reason", sa.Text(), nullable=True),
        stamped_column("updated_at"),
        not_negative(USAGE, "claims"),
        named_check(USAGE, "granted_within_wanted", "granted BETWEEN 0 AND wanted"),
        not_negative(USAGE, "running_bound"),
        not_negative(USAGE, "counted"),
        named_check(
            USAGE,
            "throttled_reason_known",
            "throttled_reason IN ('max_running', 'rate', 'weight')",
        ),
        named_primary_key(USAGE, "deployment", "queue", "tenant_id", "job_type"),
    )
    op.create_table(
        SHARES,
        *text_columns("deployment", "queue", "tenant_id"),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("virtual_time", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("floor_time", sa.Double(), nullable=True),
        *optional_times("backlogged_at", "throttled_at"),
        stamped_column("updated_at"),
        in_range(SHARES, "weight", 1, 1000),
        named_primary_key(SHARES, "deployment", "queue", "tenant_id"),
    )
    op.drop_index("ix_tenantq_jobs_lease_owner", table_name=JOBS)
    op.create_index(
        "ix_tenantq_jobs_leased",
        JOBS,
        ["deployment", "tenant_id", "lease_owner"],
        postgresql_where=sa.text(LEASED),
    )


def downgrade() -> None:
    op.drop_index("ix_tenantq_jobs_leased", table_name=JOBS)
    op.create_index(
        "ix_tenantq_jobs_lease_owner",
        JOBS,
        ["deployment", "lease_owner"],
        postgresql_where=sa.text(LEASED),
    )
    op.drop_table(SHARES)
    op.drop_table(USAGE)
    op.drop_table(TENANTS)
