"""a succeeded attempt is recorded on its job row; the other attempts in tenantq_attempt_log

Every result used to write a row into ``tenantq_job_attempts`` besides the update of its job.
Most attempts succeed, and for them that row repeated what the job row already says (the
attempt number, the finish time) plus three facts: which worker, when the attempt started,
how long the handler ran. That insert (heap, primary key, the (job, attempt) index, the
sequence, its WAL) was a fifth of the ledger's Postgres per job. Those three facts now go on
the job row in the same update (``success_worker_id``, ``success_started_at``,
``success_duration_ms``), as Oban and River keep an attempt's facts on their job rows. Every
other outcome (failures, timeouts, crashes, stale results, releases, snoozes, cancels) is
still a row of its own, in the table now called ``tenantq_attempt_log``.

``tenantq_job_attempts`` becomes a view with the same columns: the log's rows and, for each
job whose success is on its row, that success (``id`` NULL, so ``ORDER BY id`` puts it last).
Queries written against the old table read the whole history as before. Writes through the
view go to the log (an ``INSTEAD OF`` trigger), so a worker of the previous release still
running during a rolling upgrade keeps writing its attempts where they belong; its successes
land in the log with the job's ``success_*`` left NULL, and the view shows each once.

Create Date: 2026-12-06 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenantq.migrations.building_blocks import JOBS

revision: str = "0008"
down_revision: str | None = "0007"

OLD = "tenantq_job_attempts"
LOG = "tenantq_attempt_log"
#: Used through op.f() inside the steps: ``op`` only exists while Alembic runs a migration.
SUCCESS_CHECK = "ck_tenantq_jobs_success_only_when_succeeded"

#: (old name, new name) of the log's constraints and index, as the naming convention of
#: ``tenantq.store.models`` derives them from the table's name.
RENAMED = (
    ("pk_tenantq_job_attempts", "pk_tenantq_attempt_log"),
    ("ix_tenantq_job_attempts_job_id_attempt", "ix_tenantq_attempt_log_job_id_attempt"),
    ("ck_tenantq_job_attempts_outcome_known", "ck_tenantq_attempt_log_outcome_known"),
)

VIEW = """
CREATE VIEW tenantq_job_attempts AS
SELECT id, job_id, attempt, worker_id, outcome, error_class, error_message, started_at,
       finished_at, duration_ms
FROM tenantq_attempt_log
UNION ALL
SELECT NULL::bigint, j.id, j.attempts, j.success_worker_id, 'succeeded'::varchar(32),
       NULL::text, NULL::text, j.success_started_at, j.finished_at, j.success_duration_ms
FROM tenantq_jobs j
WHERE j.success_worker_id IS NOT NULL
"""

#: Writes through the view: an insert is a log row (a previous release's worker writes its
#: attempts this way), a delete removes a log row. A success recorded on its job row has no
#: row of its own to delete: it goes with its job.
WRITE_FUNCTION = """
CREATE FUNCTION tenantq_job_attempts_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, error_class,
                                         error_message, started_at, finished_at, duration_ms)
        VALUES (NEW.job_id, NEW.attempt, NEW.worker_id, NEW.outcome, NEW.error_class,
                NEW.error_message, NEW.started_at, coalesce(NEW.finished_at, now()),
                NEW.duration_ms)
        RETURNING id, finished_at INTO NEW.id, NEW.finished_at;
        RETURN NEW;
    END IF;
    IF OLD.id IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM tenantq_attempt_log WHERE id = OLD.id;
    RETURN OLD;
END
$$
"""
WRITE_TRIGGER = """
CREATE TRIGGER tenantq_job_attempts_write
INSTEAD OF INSERT OR DELETE ON tenantq_job_attempts
FOR EACH ROW EXECUTE FUNCTION tenantq_job_attempts_write()
"""


#: The successes recorded on job rows, as rows of the log again, in finishing order.
SUCCESSES_AS_ROWS = """
INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, started_at, finished_at,
                                 duration_ms)
SELECT id, attempts, success_worker_id, 'succeeded', success_started_at, finished_at,
       success_duration_ms
FROM tenantq_jobs WHERE success_worker_id IS NOT NULL
ORDER BY finished_at
"""


def upgrade() -> None:
    op.add_column(JOBS, sa.Column("success_worker_id", sa.Text(), nullable=True))
    op.add_column(JOBS, sa.Column("success_started_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(JOBS, sa.Column("success_duration_ms", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f(SUCCESS_CHECK), JOBS, "success_worker_id IS NULL OR state = 'succeeded'"
    )
    op.rename_table(OLD, LOG)
    op.execute(f"ALTER SEQUENCE {OLD}_id_seq RENAME TO {LOG}_id_seq")
    for old, new in RENAMED:
        # Renaming the primary key constraint renames its index with it.
        if old.startswith("ix_"):
            op.execute(f"ALTER INDEX {old} RENAME TO {new}")
        else:
            op.execute(f"ALTER TABLE {LOG} RENAME CONSTRAINT {old} TO {new}")
    op.execute(VIEW)
    op.execute(WRITE_FUNCTION)
    op.execute(WRITE_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER tenantq_job_attempts_write ON tenantq_job_attempts")
    op.execute("DROP FUNCTION tenantq_job_attempts_write()")
    op.execute("DROP VIEW tenantq_job_attempts")
    op.execute(SUCCESSES_AS_ROWS)
    for old, new in RENAMED:
        if old.startswith("ix_"):
            op.execute(f"ALTER INDEX {new} RENAME TO {old}")
        else:
            op.execute(f"ALTER TABLE {LOG} RENAME CONSTRAINT {new} TO {old}")
    op.execute(f"ALTER SEQUENCE {LOG}_id_seq RENAME TO {OLD}_id_seq")
    op.rename_table(LOG, OLD)
    op.drop_constraint(op.f(SUCCESS_CHECK), JOBS, type_="check")
    op.drop_column(JOBS, "success_duration_ms")
    op.drop_column(JOBS, "success_started_at")
    op.drop_column(JOBS, "success_worker_id")
