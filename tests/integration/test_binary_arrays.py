"""The hot statements' array parameters (``tenantq.store.binary_arrays``) read back through a
real PostgreSQL as the values they were made of: element types, NULLs, empty arrays, edge
values, and the same bytes as psycopg's own list dumper."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
import pytest

from tenantq.store.binary_arrays import (
    ArrayParameter,
    BigintArray,
    BoolArray,
    ByteaArray,
    Float8Array,
    TextArray,
    TimestamptzArray,
    UuidArray,
)

_NOW = dt.datetime(2026, 12, 4, 22, 50, 1, 123456, tzinfo=dt.UTC)

CASES: list[tuple[type[ArrayParameter], str, list[Any]]] = [
    (UuidArray, "uuid[]", [uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), None]),
    (TextArray, "text[]", ["tenant-1", "", "é ✓ 日本", "x" * 70_000, None, 'a,b{c}"d\\']),
    (ByteaArray, "bytea[]", [b"", b"\x00\xff" * 3, bytes(range(256)), None]),
    (BigintArray, "bigint[]", [0, -1, 1, 2**63 - 1, -(2**63), None]),
    (Float8Array, "double precision[]", [0.0, -0.5, 1e300, float("inf"), None]),
    (BoolArray, "boolean[]", [True, False, None]),
    (
        TimestamptzArray,
        "timestamp with time zone[]",
        [
            _NOW,
            _NOW,  # the same time twice: made once, sent twice
            _NOW.astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
            dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
            dt.datetime(1, 1, 1, tzinfo=dt.UTC),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
            None,
        ],
    ),
]


#: One value in every element (each made once and repeated), NULL throughout included.
CASES += [
    (UuidArray, "uuid[]", [uuid.UUID(int=7)] * 3),
    (TextArray, "text[]", ["default"] * 500),
    (TextArray, "text[]", [None] * 4),
    (ByteaArray, "bytea[]", [b"{}"] * 3),
    (BigintArray, "bigint[]", [2**40] * 300),
    (Float8Array, "double precision[]", [None] * 2),
    (BoolArray, "boolean[]", [False] * 5),
    (TimestamptzArray, "timestamp with time zone[]", [_NOW] * 4),
]


@pytest.mark.parametrize(("array", "type_name", "values"), CASES)
def test_an_array_reads_back_as_its_values(
    db: psycopg.Connection[Any], array: type[ArrayParameter], type_name: str, values: list[Any]
) -> None:
    row = db.execute(
        "SELECT %(a)b, pg_typeof(%(a)b)::text, cardinality(%(a)b), %(a)b = %(plain)b",
        {"a": array(values), "plain": values},
    ).fetchone()
    assert row is not None
    assert row[0] == values
    assert row[1] == type_name
    assert row[2] == len(values)
    # The same array as psycopg's own list dumper sends (array equality takes NULL = NULL).
    assert row[3] is True


@pytest.mark.parametrize(("array", "type_name", "values"), CASES)
def test_an_empty_array_is_empty(
    db: psycopg.Connection[Any], array: type[ArrayParameter], type_name: str, values: list[Any]
) -> None:
    row = db.execute("SELECT %(a)b, pg_typeof(%(a)b)::text", {"a": array([])}).fetchone()
    assert row == ([], type_name)


def test_the_statements_casts_refuse_what_their_columns_cannot_hold(
    db: psycopg.Connection[Any],
) -> None:
    """Integers go as int8 and are cast by the statement: out of range is Postgres's error
    (a refused statement), not a Python one."""
    assert db.execute("SELECT %b::int[]", [BigintArray([2**31 - 1])]).fetchone() == ([2**31 - 1],)
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        db.execute("SELECT %b::int[]", [BigintArray([2**31])])
    db.rollback()
    assert db.execute(
        "SELECT %b::job_state[]::text[]", [TextArray(["leased", "succeeded"])]
    ).fetchone() == (["leased", "succeeded"],)


def test_a_naive_time_is_refused_before_anything_is_sent(db: psycopg.Connection[Any]) -> None:
    with pytest.raises(TypeError, match="naive"):
        db.execute("SELECT %b", [TimestamptzArray([_NOW, dt.datetime(2026, 1, 1)])])
