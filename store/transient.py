"""Database errors that say nothing about the work: a deadlock or a serialization failure.

One rule for the whole project: such an error is retried in place, up to ``TRANSIENT_RETRIES``
times with a short growing pause, before it counts. The store applies it to its own
transactions; the worker applies it to handlers (whose own database work hit one).
"""

from __future__ import annotations

#: SQLSTATEs of errors that are transient by definition: deadlock, serialization failure.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
#: How often a transient error is retried in place before it counts.
TRANSIENT_RETRIES = 3


def is_transient_database_error(error: BaseException) -> bool:
    """A deadlock or serialization failure, raised by psycopg or wrapped (by SQLAlchemy, or as
    the cause or context of another exception)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "sqlstate", None) in TRANSIENT_SQLSTATES:
            return True
        if getattr(getattr(current, "orig", None), "sqlstate", None) in TRANSIENT_SQLSTATES:
            return True
        current = current.__cause__ or current.__context__
    return False


def backoff_seconds(retry: int) -> float:
    """The pause before in-place retry number ``retry`` (0-based): 20 ms, 40 ms, 80 ms."""
    return 0.02 * 2.0**retry
