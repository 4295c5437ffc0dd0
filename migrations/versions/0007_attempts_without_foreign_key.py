"""attempts without a foreign key: the ledger's statements keep attempt rows to existing jobs

Every attempt row paid the foreign key's check, a ``SELECT ... FOR KEY SHARE`` of its job
run through SPI once per row: about 5 us of Postgres per job of the worker's result batch,
almost as much as the insert of the attempt row itself (measured: 11.0 us per row with the
key, 6.1 without). The statements that write attempt rows already name jobs that exist: a
crash or a result that was applied comes from the update of its (locked) job row, and a
stale result locks its job ``FOR KEY SHARE`` itself, the one row the key had to lock.
Retention deletes the attempt rows with their jobs (``JOB_PRUNE_BATCH``), which the key's
``ON DELETE CASCADE`` did besides.

Create Date: 2026-12-05 01:00:00
"""

from __future__ import annotations

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"

TABLE = "tenantq_job_attempts"
#: Used through op.f() inside the steps: ``op`` only exists while Alembic runs a migration.
FOREIGN_KEY = "fk_tenantq_job_attempts_job_id_tenantq_jobs"


def upgrade() -> None:
    op.drop_constraint(op.f(FOREIGN_KEY), TABLE, type_="foreignkey")


def downgrade() -> None:
    # Rows of jobs deleted without retention (by hand) would refuse the key.
    op.execute(
        "DELETE FROM tenantq_job_attempts a "
        "WHERE NOT EXISTS (SELECT 1 FROM tenantq_jobs j WHERE j.id = a.job_id)"
    )
    op.create_foreign_key(
        op.f(FOREIGN_KEY), TABLE, "tenantq_jobs", ["job_id"], ["id"], ondelete="CASCADE"
    )
