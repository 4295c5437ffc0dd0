"""Array parameters of the hot batch statements, dumped to Postgres's binary array format in one
pass per array.

The claim and the completion send each column of their batch as an array (23 per job between
them). psycopg's generic list dumper handles any element type and any depth, and pays for that
per element: a dumper call, a length packed in a call of its own, two appends, about 0.37 us
whatever the type, 4.7 us per claimed job (measured on the claim's 13 columns at 128 rows).
These wrappers name the element type of a one-dimensional column, so its dumper makes each
element's bytes in one expression of a list comprehension (0.1-0.2 us) and joins them.

The format (``array_send`` / ``array_recv`` in Postgres's ``arrayfuncs.c``): dimensions,
a has-nulls flag and the element type's oid, then per dimension its size and lower bound
(1), then per element its length (-1 for NULL) and its bytes in the type's binary form. Only
the types whose binary form is simple are here (uuid, text, bytea, int8, float8, bool, and
timestamptz, each distinct time of an array dumped once by psycopg's own dumper, as a batch's
jobs share their creation and start times). Integers go as ``int8``: the statements cast them
to their column type, so a value out of range fails as it did (a refused statement), never in
Python.

An integration test (``tests/integration/test_binary_arrays.py``) reads every wrapper back
through a real Postgres, NULLs and edge values included.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import adapters
from psycopg.adapt import Buffer, Dumper, PyFormat
from psycopg.postgres import types
from psycopg.pq import Format

_HEAD = struct.Struct(">iiIii").pack  # one dimension: ndim, has nulls, oid, size, lower bound
_EMPTY = struct.Struct(">iiI").pack  # no dimension: ndim 0, no nulls, oid
_LENGTH = struct.Struct(">i").pack
_INT8 = struct.Struct(">iq").pack
_FLOAT8 = struct.Struct(">id").pack
_NULL = _LENGTH(-1)
_TRUE = _LENGTH(1) + b"\x01"
_FALSE = _LENGTH(1) + b"\x00"
_UUID_LENGTH = _LENGTH(16)


class ArrayParameter:
    """A one-dimensional array parameter whose elements are of the type its class names
    (or None: NULL)."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.values)!r})"


class UuidArray(ArrayParameter):
    """``uuid[]`` of ``uuid.UUID`` values."""

    __slots__ = ()


class TextArray(ArrayParameter):
    """``text[]`` of ``str`` values."""

    __slots__ = ()


class ByteaArray(ArrayParameter):
    """``bytea[]`` of ``bytes`` values."""

    __slots__ = ()


class BigintArray(ArrayParameter):
    """``int8[]`` of ``int`` values."""

    __slots__ = ()


class Float8Array(ArrayParameter):
    """``float8[]`` of ``float`` values."""

    __slots__ = ()


class BoolArray(ArrayParameter):
    """``bool[]`` of ``bool`` values."""

    __slots__ = ()


class TimestamptzArray(ArrayParameter):
    """``timestamptz[]`` of aware ``datetime`` values (a naive one is refused: which zone it
    means would depend on the session's)."""

    __slots__ = ()


def _each_distinct_once(values: Sequence[Any], element: Callable[[Any], bytes]) -> list[bytes]:
    """The elements' bytes, ``element`` called once per distinct value other than NULL: for
    columns whose values repeat across a batch."""
    made: dict[Any, bytes] = {None: _NULL}
    for value in set(values):
        if value is not None:
            made[value] = element(value)
    return [made[value] for value in values]


def _text_element(value: str) -> bytes:
    data = value.encode()
    return _LENGTH(len(data)) + data


class _ArrayDumper(Dumper):
    format = Format.BINARY
    #: The element type's name (``psycopg.postgres.types``); its oid and its array's are
    #: looked up once per class.
    element_type = ""
    _element_oid = 0
    #: Look for one value throughout first: ``list.count`` compares in C for these types
    #: (not for ``uuid.UUID``, whose ``__eq__`` is Python, and whose values never repeat).
    _may_repeat = True

    def __init_subclass__(cls) -> None:
        info = types.get(cls.element_type)
        assert info is not None and info.array_oid
        cls.oid = info.array_oid
        cls._element_oid = info.oid

    def dump(self, obj: ArrayParameter) -> Buffer:
        values = obj.values
        if not values:
            return _EMPTY(0, 0, self._element_oid)
        size = len(values)
        if self._may_repeat and values.count(first := values[0]) == size:
            # One value in every row (a batch's queue, job type, outcome, state, no error):
            # its bytes made once and repeated, no Python per element.
            (part,) = self.elements([first])
            return _HEAD(1, part == _NULL, self._element_oid, size, 1) + part * size
        parts = self.elements(values)
        # A NULL is the only element that is exactly these 4 bytes (a length is >= 0).
        head = _HEAD(1, _NULL in parts, self._element_oid, len(parts), 1)
        return head + b"".join(parts)

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        raise NotImplementedError


class _UuidArrayDumper(_ArrayDumper):
    element_type = "uuid"
    _may_repeat = False

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        return [
            _NULL if value is None else _UUID_LENGTH + value.int.to_bytes(16, "big")
            for value in values
        ]


class _TextArrayDumper(_ArrayDumper):
    element_type = "text"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        # A batch's queue, job type, topic, outcome and state are one value in every row, its
        # tenants a few (0.03 us per element instead of 0.13; 0.26 when every value differs,
        # as error messages do, which are rare).
        return _each_distinct_once(values, _text_element)


class _ByteaArrayDumper(_ArrayDumper):
    element_type = "bytea"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        return [_NULL if value is None else _LENGTH(len(value)) + value for value in values]


class _BigintArrayDumper(_ArrayDumper):
    element_type = "int8"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        return [_NULL if value is None else _INT8(8, value) for value in values]


class _Float8ArrayDumper(_ArrayDumper):
    element_type = "float8"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        return [_NULL if value is None else _FLOAT8(8, value) for value in values]


class _BoolArrayDumper(_ArrayDumper):
    element_type = "bool"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        return [_NULL if value is None else _TRUE if value else _FALSE for value in values]


#: psycopg's own binary timestamptz dumper (C where psycopg's binary build is installed):
#: 0.1 us a time, and a naive datetime is its TypeError.
_TIMESTAMPTZ = adapters.get_dumper(dt.datetime, PyFormat.BINARY)(dt.datetime).dump
_TIMESTAMPTZ_LENGTH = _LENGTH(8)


def _timestamptz_element(value: dt.datetime) -> bytes:
    dumped = _TIMESTAMPTZ(value)
    assert dumped is not None  # a dumper gives None only for SQL NULL
    return _TIMESTAMPTZ_LENGTH + dumped


class _TimestamptzArrayDumper(_ArrayDumper):
    element_type = "timestamptz"

    def elements(self, values: Sequence[Any]) -> list[bytes]:
        # A batch's jobs share their creation time (one producer batch) or start time (one
        # claim).
        return _each_distinct_once(values, _timestamptz_element)


for _parameter, _dumper in (
    (UuidArray, _UuidArrayDumper),
    (TextArray, _TextArrayDumper),
    (ByteaArray, _ByteaArrayDumper),
    (BigintArray, _BigintArrayDumper),
    (Float8Array, _Float8ArrayDumper),
    (BoolArray, _BoolArrayDumper),
    (TimestamptzArray, _TimestamptzArrayDumper),
):
    adapters.register_dumper(_parameter, _dumper)
