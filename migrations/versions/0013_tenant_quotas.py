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

import sqlalchemy as sa
from alembic import op

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


def upgrade() -> None:
    op.create_table(
        TENANTS,
        sa.Column("deployment", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("rate", sa.Double(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=True),
        sa.Column("weight", sa.Integer(), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("updated_by", sa.Text(), nullable=True),
        sa.CheckConstraint(
            f"tenant_id ~ '{TENANT_ID}'", name=op.f("ck_tenantq_tenants_tenant_id_valid")
        ),
        sa.CheckConstraint(
            f"queue = '*' OR queue ~ '{QUEUE_NAME}'", name=op.f("ck_tenantq_tenants_queue_valid")
        ),
        sa.CheckConstraint(
            f"job_type = '*' OR job_type ~ '{JOB_TYPE}'",
            name=op.f("ck_tenantq_tenants_job_type_valid"),
        ),
        sa.CheckConstraint(
            "max_running BETWEEN 1 AND 1000000",
            name=op.f("ck_tenantq_tenants_max_running_in_range"),
        ),
        sa.CheckConstraint(
            "rate > 0 AND rate <= 1000000", name=op.f("ck_tenantq_tenants_rate_in_range")
        ),
        sa.CheckConstraint(
            "burst BETWEEN 1 AND 1000000", name=op.f("ck_tenantq_tenants_burst_in_range")
        ),
        sa.CheckConstraint(
            "burst IS NULL OR rate IS NOT NULL", name=op.f("ck_tenantq_tenants_burst_needs_a_rate")
        ),
        sa.CheckConstraint(
            "weight BETWEEN 1 AND 1000", name=op.f("ck_tenantq_tenants_weight_in_range")
        ),
        sa.CheckConstraint(
            "weight IS NULL OR job_type = '*'", name=op.f("ck_tenantq_tenants_weight_per_queue")
        ),
        sa.CheckConstraint(
            "max_running IS NOT NULL OR rate IS NOT NULL OR weight IS NOT NULL",
            name=op.f("ck_tenantq_tenants_limits_something"),
        ),
        sa.PrimaryKeyConstraint(
            "deployment", "tenant_id", "queue", "job_type", name=op.f("pk_tenantq_tenants")
        ),
    )
    op.create_table(
        USAGE,
        sa.Column("deployment", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("claims", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("wanted", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("granted", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("rate", sa.Double(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=True),
        sa.Column("running_bound", sa.Integer(), nullable=True),
        sa.Column("counted", sa.Integer(), nullable=True),
        sa.Column("rate_tat", sa.DateTime(timezone=True), nullable=True),
        sa.Column("throttled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("throttled_reason", sa.Text(), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("claims >= 0", name=op.f("ck_tenantq_tenant_usage_claims_not_negative")),
        sa.CheckConstraint(
            "granted BETWEEN 0 AND wanted",
            name=op.f("ck_tenantq_tenant_usage_granted_within_wanted"),
        ),
        sa.CheckConstraint(
            "running_bound >= 0", name=op.f("ck_tenantq_tenant_usage_running_bound_not_negative")
        ),
        sa.CheckConstraint(
            "counted >= 0", name=op.f("ck_tenantq_tenant_usage_counted_not_negative")
        ),
        sa.CheckConstraint(
            "throttled_reason IN ('max_running', 'rate', 'weight')",
            name=op.f("ck_tenantq_tenant_usage_throttled_reason_known"),
        ),
        sa.PrimaryKeyConstraint(
            "deployment", "queue", "tenant_id", "job_type", name=op.f("pk_tenantq_tenant_usage")
        ),
    )
    op.create_table(
        SHARES,
        sa.Column("deployment", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("virtual_time", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("floor_time", sa.Double(), nullable=True),
        sa.Column("backlogged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("throttled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "weight BETWEEN 1 AND 1000", name=op.f("ck_tenantq_tenant_shares_weight_in_range")
        ),
        sa.PrimaryKeyConstraint(
            "deployment", "queue", "tenant_id", name=op.f("pk_tenantq_tenant_shares")
        ),
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
