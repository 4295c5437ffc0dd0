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


def text_columns(*names: str) -> list[sa.Column[Any]]:
    """A required text column of each name, in order."""
    return [sa.Column(name, sa.Text(), nullable=False) for name in names]


def integer_columns(*names: str) -> list[sa.Column[Any]]:
    """A required integer column of each name, in order."""
    return [sa.Column(name, sa.Integer(), nullable=False) for name in names]


def optional_integers(*names: str) -> list[sa.Column[Any]]:
    """An integer column of each name that stays empty until something sets it."""
    return [sa.Column(name, sa.Integer(), nullable=True) for name in names]


def counter_column(name: str, kind: Any = sa.Integer) -> sa.Column[Any]:
    """A number that starts at zero (``kind``: the column's type class)."""
    return sa.Column(name, kind(), server_default=sa.text("0"), nullable=False)


def optional_times(*names: str) -> list[sa.Column[Any]]:
    """A timestamp column of each name that stays empty until something happens."""
    return [sa.Column(name, sa.DateTime(timezone=True), nullable=True) for name in names]


def named_check(table: str, name: str, condition: str) -> sa.CheckConstraint:
    """A CHECK of ``table`` named ``ck_<table>_<name>`` by the naming convention."""
    return sa.CheckConstraint(condition, name=op.f(f"ck_{table}_{name}"))


def not_negative(table: str, column: str) -> sa.CheckConstraint:
    """A CHECK that ``column`` of ``table`` is zero or more, named ``<column>_not_negative``."""
    return named_check(table, f"{column}_not_negative", f"{column} >= 0")


def in_range(table: str, column: str, low: int, high: int) -> sa.CheckConstraint:
    """A CHECK that ``column`` of ``table`` is between ``low`` and ``high`` (both included),
    named ``<column>_in_range``; NULL passes, as in every CHECK."""
    return named_check(table, f"{column}_in_range", f"{column} BETWEEN {low} AND {high}")


def named_primary_key(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    """``table``'s primary key over ``columns``, named ``pk_<table>``."""
    return sa.PrimaryKeyConstraint(*columns, name=op.f(f"pk_{table}"))
