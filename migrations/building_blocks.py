"""Pieces several revisions are built from.

A revision that already ran was built from these values: changing one would make a fresh
database differ from an upgraded one. A new shape gets a new name; these stay as they are.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

#: The jobs table, as every revision since the first names it.
JOBS = "tenantq_jobs"
#: Jobs that wait for a worker: due, or due later.
WAITING = "state IN ('pending', 'runnable', 'retrying')"
#: Jobs without a terminal state.
UNFINISHED = "state IN ('pending', 'runnable', 'leased', 'retrying')"


def stamped_column(name: str, default: str = "now()") -> sa.Column[Any]:
    """A timestamp the database writes (``default``, an SQL expression) unless told one."""
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        server_default=sa.text(default),
        nullable=False,
    )


def create_partial_index(name: str, table: str, columns: list[str], where: str) -> None:
    """Index ``columns`` of ``table`` for the rows that match ``where`` (an SQL predicate)."""
    op.create_index(name, table, columns, unique=False, postgresql_where=sa.text(where))


def job_foreign_key(table: str) -> sa.ForeignKeyConstraint:
    """``table.job_id`` names a job; its rows go when their job goes."""
    return sa.ForeignKeyConstraint(
        ["job_id"],
        [f"{JOBS}.id"],
        name=op.f(f"fk_{table}_job_id_{JOBS}"),
        ondelete="CASCADE",
    )
