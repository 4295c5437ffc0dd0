"""The runner tells a transient database error (a deadlock, a serialisation failure) from any
other, wrapped or chained."""

from __future__ import annotations

from tenantq.consumer.runner import is_transient_database_error


def test_transient_database_errors_are_recognised() -> None:
    class Deadlock(Exception):
        sqlstate = "40P01"

    class Wrapped(Exception):
        orig = Deadlock()

    assert is_transient_database_error(Deadlock())
    assert is_transient_database_error(Wrapped())
    try:
        try:
            raise Deadlock()
        except Deadlock as inner:
            raise RuntimeError("query failed") from inner
    except RuntimeError as outer:
        assert is_transient_database_error(outer)
    assert not is_transient_database_error(ValueError("no"))
