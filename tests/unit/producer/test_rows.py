"""``Rows``: the batches' column-kept sequences behave as the list of their rows (equal to
it, unhashable, shown as it), and are never equal to a sequence of another kind."""

from __future__ import annotations

import uuid

import pytest

from tenantq.producer.batch import JobRefs
from tenantq.producer.delivery import JobRef
from tenantq.producer.request import Destination, PreparedJobs


def _refs() -> JobRefs:
    return JobRefs([1, 2], ["q", "q"], [0, 1], [10, 11], existing=frozenset({1}))


def _prepared() -> PreparedJobs:
    destination = Destination("q", "acme", "tenantq.q", 0, b"acme", ())
    ids = [uuid.UUID(int=n) for n in (1, 2)]
    return PreparedJobs(
        [i.int for i in ids],
        [str(i).encode() for i in ids],
        [b"one", b"two"],
        [destination, destination],
        keyed=False,
    )


def test_equal_to_a_list_or_tuple_of_the_same_rows_and_to_its_own_kind() -> None:
    refs = _refs()
    rows = [
        JobRef(uuid.UUID(int=1), "q", 0, 10, True),
        JobRef(uuid.UUID(int=2), "q", 1, 11, False),
    ]
    assert refs == rows
    assert refs == tuple(rows)
    assert refs == _refs()
    assert refs != rows[:1]
    assert refs != rows[::-1]
    assert _prepared() == list(_prepared())
    assert _prepared() == _prepared()[:]


def test_not_equal_to_rows_of_another_kind_or_to_anything_else() -> None:
    assert _refs() != _prepared()
    assert _refs() != {0: "not a sequence"}
    assert _refs().__eq__(_prepared()) is NotImplemented


def test_unhashable_as_the_list_it_stands_for() -> None:
    with pytest.raises(TypeError):
        hash(_refs())
    with pytest.raises(TypeError):
        hash(_prepared())


def test_shown_as_its_rows() -> None:
    refs = _refs()
    assert repr(refs) == f"JobRefs({list(refs)!r})"
    prepared = _prepared()
    assert repr(prepared) == f"PreparedJobs({list(prepared)!r})"
