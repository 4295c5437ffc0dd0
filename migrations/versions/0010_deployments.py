"""deployments are namespaces: every table a deployment writes says whose rows they are

Two deployments (topic prefixes) on one database used to share every row: the placement table
was keyed by (queue, tenant), so one deployment's workers moved another's tenants out of the
hot lane; the console, the API and ``tenantq stats`` listed and acted on every prefix's jobs
and workers. Each table a deployment writes now has a ``deployment`` column (the topic
prefix), NOT NULL and without a default (a statement that forgets it fails, it never lands
in someone else's namespace); keys and unique indexes include it (placement, worker
registry, periodic schedule names, idempotency keys) and every index the statements search by
leads with it. ``tenantq_attempt_log`` keeps none: an attempt row belongs to its job's
deployment. Job ids stay the primary key on their own: a message that carries another
deployment's job id is refused by the claim (a conflict), never a second row.

Existing rows are given the deployment they belong to where the data says it, else the
default prefix ``tenantq``:

| table | deployment |
| --- | --- |
| jobs | the prefix of ``origin_topic`` (``<prefix>.<queue>``, its ``.retry.<i>``, ``.lane``, ``.dlq``) |
| outbox entries | their job's |
| workers | that of a job they hold leased |
| periodic schedules | that of their last job; else the only deployment with jobs in their queue |
| replay/purge audit rows | that of their first job; else as schedules |
| placements | one copy for every deployment with jobs in the queue (each obeyed the row before) |

The downgrade merges the namespaces again: where two deployments hold one name, the one kept
is the operator's placement (then the latest), the latest schedule and worker row, and the
oldest job for an idempotency key (the later jobs keep their rows without the key).

Stop the previous release's workers and producers before this upgrade: their statements name
no deployment and are refused once it runs.

Create Date: 2026-12-08 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenantq.migrations.building_blocks import JOBS, WAITING, create_partial_index

revision: str = "0010"
down_revision: str | None = "0009"

DEFAULT = "tenantq"

#: (name, columns after the deployment, predicate) of the job indexes that gain the deployment
#: as their first column. The idempotency key's unique index is renamed with it.
JOB_INDEXES = (
    ("ix_tenantq_jobs_waiting", ["queue", "run_after"], WAITING),
    ("ix_tenantq_jobs_lease_owner", ["lease_owner"], "state = 'leased'"),
    ("ix_tenantq_jobs_queue_tenant_state", ["queue", "tenant_id", "state"], WAITING),
    ("ix_tenantq_jobs_finished_at", ["finished_at"], "finished_at IS NOT NULL"),
    ("ix_tenantq_jobs_dead_recent", ["queue", "finished_at"], "state = 'dead'"),
)
OLD_KEY_INDEX = "uq_tenantq_jobs_queue_idempotency_key"
KEY_INDEX = "uq_tenantq_jobs_deployment_queue_idempotency_key"
KEYED = "idempotency_key IS NOT NULL"
OLD_OUTBOX_INDEX = "ix_tenantq_outbox_main_topic_generation_id"
OUTBOX_INDEX = "ix_tenantq_outbox_deployment_main_topic_generation_id"
AUDIT_INDEX = "ix_tenantq_replay_audit_deployment_id"

#: The prefix of a job's ``origin_topic``, given its queue (queue names have no dot; a prefix
#: may), when it is a valid prefix; NULL otherwise.
ORIGIN_PREFIX = r"""
CASE WHEN queue ~ '^[A-Za-z0-9_-]{1,64}$' THEN
    substring(origin_topic FROM '^([A-Za-z0-9._-]{1,100})\.' || queue
                                || '(?:\.retry\.[0-9]+|\.lane|\.dlq)?$')
END
"""

#: Jobs whose topic names another prefix than the default (the others keep the column's
#: default of the moment, without being rewritten).
JOBS_FROM_ORIGIN = f"""
UPDATE tenantq_jobs SET deployment = {ORIGIN_PREFIX}
WHERE origin_topic IS NOT NULL AND {ORIGIN_PREFIX} <> '{DEFAULT}'
"""  # noqa: S608 - fixed text

#: The deployments that have jobs of each queue, for the tables that only know a queue.
QUEUES_OF_DEPLOYMENTS = """
CREATE TEMPORARY TABLE tenantq_0010_queues ON COMMIT DROP AS
SELECT DISTINCT deployment, queue FROM tenantq_jobs
"""

WORKERS_FROM_LEASES = """
UPDATE tenantq_workers w SET deployment = j.deployment
FROM (SELECT DISTINCT ON (lease_owner) lease_owner, deployment FROM tenantq_jobs
      WHERE state = 'leased' ORDER BY lease_owner, deployment) j
WHERE j.lease_owner = w.id
"""

OUTBOX_FROM_JOBS = """
UPDATE tenantq_outbox o SET deployment = j.deployment
FROM tenantq_jobs j WHERE j.id = o.job_id
"""


def _from_only_deployment_of_queue(table: str) -> str:
    """Rows of ``table`` still without a deployment take the only one with jobs in their
    queue, if exactly one has."""
    return f"""
UPDATE {table} t SET deployment = (
    SELECT min(q.deployment) FROM tenantq_0010_queues q WHERE q.queue = t.queue)
WHERE t.deployment IS NULL
  AND (SELECT count(*) FROM tenantq_0010_queues q WHERE q.queue = t.queue) = 1
"""  # noqa: S608 - fixed text


PERIODIC_FROM_LAST_JOB = """
UPDATE tenantq_periodic p SET deployment = j.deployment
FROM tenantq_jobs j WHERE j.id = p.last_job_id
"""

AUDIT_FROM_FIRST_JOB = """
UPDATE tenantq_replay_audit a SET deployment = j.deployment
FROM tenantq_jobs j WHERE j.id = a.job_ids[1]
"""

#: A placement row was obeyed by every deployment on the database: each one with jobs in the
#: queue gets its copy; a row of a queue nobody has jobs in goes to the default.
PLACEMENT_COPIES = """
INSERT INTO tenantq_tenant_placement (deployment, queue, tenant_id, mode, shards, partitions,
                                      updated_at, updated_by, reason, automatic)
SELECT q.deployment, p.queue, p.tenant_id, p.mode, p.shards, p.partitions, p.updated_at,
       p.updated_by, p.reason, p.automatic
FROM tenantq_tenant_placement p JOIN tenantq_0010_queues q ON q.queue = p.queue
WHERE p.deployment IS NULL
"""
PLACEMENT_ORIGINALS = """
DELETE FROM tenantq_tenant_placement p
WHERE p.deployment IS NULL AND EXISTS (
    SELECT 1 FROM tenantq_0010_queues q WHERE q.queue = p.queue)
"""


def _rest_to_default(table: str) -> str:
    return f"UPDATE {table} SET deployment = '{DEFAULT}' WHERE deployment IS NULL"  # noqa: S608


def upgrade() -> None:
    # Jobs: the default at once for every row (no rewrite), then the rows of other prefixes.
    op.add_column(JOBS, sa.Column("deployment", sa.Text(), server_default=DEFAULT, nullable=False))
    op.execute(JOBS_FROM_ORIGIN)
    op.alter_column(JOBS, "deployment", server_default=None)
    op.execute(QUEUES_OF_DEPLOYMENTS)

    # Workers: matched through the leases they hold (by the owner index still as it was).
    op.add_column("tenantq_workers", sa.Column("deployment", sa.Text(), nullable=True))
    op.execute(WORKERS_FROM_LEASES)
    _finish("tenantq_workers", ["deployment", "id"])

    op.add_column("tenantq_outbox", sa.Column("deployment", sa.Text(), nullable=True))
    op.execute(OUTBOX_FROM_JOBS)
    op.alter_column("tenantq_outbox", "deployment", nullable=False)

    op.add_column("tenantq_periodic", sa.Column("deployment", sa.Text(), nullable=True))
    op.execute(PERIODIC_FROM_LAST_JOB)
    op.execute(_from_only_deployment_of_queue("tenantq_periodic"))
    _finish("tenantq_periodic", ["deployment", "name"])

    op.add_column("tenantq_replay_audit", sa.Column("deployment", sa.Text(), nullable=True))
    op.execute(AUDIT_FROM_FIRST_JOB)
    op.execute(_from_only_deployment_of_queue("tenantq_replay_audit"))
    op.execute(_rest_to_default("tenantq_replay_audit"))
    op.alter_column("tenantq_replay_audit", "deployment", nullable=False)
    op.create_index(AUDIT_INDEX, "tenantq_replay_audit", ["deployment", "id"])

    op.drop_constraint("pk_tenantq_tenant_placement", "tenantq_tenant_placement", type_="primary")
    op.add_column("tenantq_tenant_placement", sa.Column("deployment", sa.Text(), nullable=True))
    op.execute(PLACEMENT_COPIES)
    op.execute(PLACEMENT_ORIGINALS)
    _finish("tenantq_tenant_placement", ["deployment", "queue", "tenant_id"], drop_key=False)

    # Indexes: the deployment first, so one deployment's rows are never read for another's.
    op.drop_index(OLD_KEY_INDEX, table_name=JOBS)
    op.create_index(
        KEY_INDEX,
        JOBS,
        ["deployment", "queue", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text(KEYED),
    )
    for name, columns, predicate in JOB_INDEXES:
        op.drop_index(name, table_name=JOBS)
        create_partial_index(name, JOBS, ["deployment", *columns], predicate)
    op.drop_index(OLD_OUTBOX_INDEX, table_name="tenantq_outbox")
    op.create_index(
        OUTBOX_INDEX, "tenantq_outbox", ["deployment", "main_topic", "generation", "id"]
    )


def _finish(table: str, key: list[str], *, drop_key: bool = True) -> None:
    """The rest of ``table``'s rows to the default, the column required, ``key`` its
    primary key."""
    op.execute(_rest_to_default(table))
    op.alter_column(table, "deployment", nullable=False)
    if drop_key:
        op.drop_constraint(f"pk_{table}", table, type_="primary")
    op.create_primary_key(f"pk_{table}", table, key)


#: Downgrade: one row per name, the one kept as the docstring says.
MERGE_PLACEMENTS = """
DELETE FROM tenantq_tenant_placement p USING tenantq_tenant_placement kept
WHERE kept.queue = p.queue AND kept.tenant_id = p.tenant_id AND kept.deployment <> p.deployment
  AND (NOT kept.automatic, kept.updated_at, kept.deployment)
    > (NOT p.automatic, p.updated_at, p.deployment)
"""
MERGE_WORKERS = """
DELETE FROM tenantq_workers w USING tenantq_workers kept
WHERE kept.id = w.id AND kept.deployment <> w.deployment
  AND (kept.heartbeat_at, kept.deployment) > (w.heartbeat_at, w.deployment)
"""
MERGE_PERIODIC = """
DELETE FROM tenantq_periodic p USING tenantq_periodic kept
WHERE kept.name = p.name AND kept.deployment <> p.deployment
  AND (kept.updated_at, kept.deployment) > (p.updated_at, p.deployment)
"""
MERGE_IDEMPOTENCY_KEYS = """
UPDATE tenantq_jobs j SET idempotency_key = NULL
WHERE j.idempotency_key IS NOT NULL AND EXISTS (
    SELECT 1 FROM tenantq_jobs kept
    WHERE kept.queue = j.queue AND kept.idempotency_key = j.idempotency_key
      AND kept.deployment <> j.deployment
      AND (kept.created_at, kept.id) < (j.created_at, j.id))
"""


def downgrade() -> None:
    op.drop_index(OUTBOX_INDEX, table_name="tenantq_outbox")
    op.create_index(OLD_OUTBOX_INDEX, "tenantq_outbox", ["main_topic", "generation", "id"])
    for name, columns, predicate in JOB_INDEXES:
        op.drop_index(name, table_name=JOBS)
        create_partial_index(name, JOBS, columns, predicate)
    op.drop_index(KEY_INDEX, table_name=JOBS)
    op.execute(MERGE_IDEMPOTENCY_KEYS)
    op.create_index(
        OLD_KEY_INDEX, JOBS, ["queue", "idempotency_key"], unique=True,
        postgresql_where=sa.text(KEYED),
    )  # fmt: skip

    for table, merge, key in (
        ("tenantq_tenant_placement", MERGE_PLACEMENTS, ["queue", "tenant_id"]),
        ("tenantq_periodic", MERGE_PERIODIC, ["name"]),
        ("tenantq_workers", MERGE_WORKERS, ["id"]),
    ):
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.execute(merge)
        op.drop_column(table, "deployment")
        op.create_primary_key(f"pk_{table}", table, key)
    op.drop_index(AUDIT_INDEX, table_name="tenantq_replay_audit")
    op.drop_column("tenantq_replay_audit", "deployment")
    op.drop_column("tenantq_outbox", "deployment")
    op.drop_column(JOBS, "deployment")
