"""How tenantq reads a database error, in one place.

* **Transient**: a deadlock or a serialization failure says nothing about the work. One rule
  for the whole project: it is retried in place, up to ``TRANSIENT_RETRIES`` times with a
  short growing pause, before it counts. The store applies it to its own transactions; the
  worker applies it to handlers (whose own database work hit one).
* **Unavailable**: the server is gone or going (a restart, a failover, a proxy that dropped the
  connection, a full disk, a statement timeout): weather, not death. The caller keeps its
  work, reconnects with backoff, and does it again.
* **Refused**: the server refused what was sent (a constraint, a value out of range, text
  with a NUL byte): the input is at fault. A batch is split to find the rows at fault; those
  get a clear error, the rest go through.
"""

from __future__ import annotations

import psycopg

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


#: SQLSTATE classes of a refusal: the rows sent are at fault (22 data exception, 23 integrity
#: constraint violation).
REFUSAL_SQLSTATE_CLASSES = ("22", "23")


def is_refusal(error: BaseException) -> bool:
    """The server (or psycopg, before sending: text with a NUL character) refused the rows
    sent; retrying them as they are would fail the same way."""
    if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
        return True
    sqlstate = getattr(error, "sqlstate", None)
    return (
        isinstance(error, psycopg.Error)
        and isinstance(sqlstate, str)
        and (sqlstate[:2] in REFUSAL_SQLSTATE_CLASSES)
    )


def describe_database_error(error: BaseException) -> str:
    """One line for a log: the SQLSTATE and the server's (or libpq's) first line."""
    sqlstate = getattr(error, "sqlstate", None)
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"{type(error).__name__}{f' [{sqlstate}]' if sqlstate else ''}: {first}"


#: What libpq and the server say when they refuse a client as configured (the server sends
#: no SQLSTATE before a session exists, so the text is all there is): a wrong password or
#: user, no ``pg_hba.conf`` entry, TLS the two ends cannot agree on, no such database.
ACCESS_REFUSED_MARKERS = (
    "authentication failed",
    "no password supplied",
    "pg_hba.conf",
    "certificate verify failed",
    "does not match host name",
    "server does not support ssl",
    "root certificate file",
    "does not exist",
)


def is_access_refused(error: BaseException) -> bool:
    """A connection the server (or libpq) refused for its credentials, TLS or database name:
    trying again as configured gets the same answer."""
    if not isinstance(error, psycopg.OperationalError) or error.sqlstate is not None:
        return False
    text = str(error).lower()
    return any(marker in text for marker in ACCESS_REFUSED_MARKERS)


def refused_access_line(error: BaseException) -> str:
    """One line for a refused connection; libpq's text names the server (host and port)."""
    said = " ".join(str(error).split())
    return (
        f"PostgreSQL refused tenantq's connection: {said} (check the user, password, database "
        "and TLS options of TENANTQ_DATABASE_URL)"
    )
