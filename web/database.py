"""The console's PostgreSQL connections: a few kept open, autocommit (fresh ``now()``), and
every failure turned into ``DatabaseUnavailable`` with a reason a person can act on.

A page that cannot read the database says so (HTTP 503 with the reason) instead of failing
with a 500; the next request tries a new connection, so the console recovers on its own when
the database is back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tenantq.errors import DatabaseUnavailable, TenantqError
from tenantq.settings import Settings
from tenantq.store.engine import DeploymentConnection, connect

#: Idle connections kept for the next request.
IDLE_CONNECTIONS = 4


class Database:
    """Hands out autocommit connections; broken ones are dropped, not returned."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._idle: list[DeploymentConnection] = []
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[DeploymentConnection]:
        """A connection for one unit of work; ``DatabaseUnavailable`` when there is none."""
        connection = self._take()
        healthy = True
        try:
            yield connection
        except psycopg.errors.UndefinedTable:
            healthy = False
            raise DatabaseUnavailable(
                "the job tables are missing: run `tenantq db upgrade`"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            healthy = False
            raise DatabaseUnavailable(describe(error)) from None
        except BaseException:
            healthy = False
            raise
        finally:
            self._give_back(connection, healthy)

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self) -> DeploymentConnection:
        with self._lock:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed and not connection.broken:
                    return connection
        try:
            return connect(self.settings, autocommit=True, application_name="tenantq-web")
        except (psycopg.Error, TenantqError) as error:
            raise DatabaseUnavailable(describe(error)) from None

    def _give_back(self, connection: DeploymentConnection, healthy: bool) -> None:
        if healthy and not connection.closed and not connection.broken:
            with self._lock:
                if len(self._idle) < IDLE_CONNECTIONS:
                    self._idle.append(connection)
                    return
        connection.close()


def describe(error: BaseException) -> str:
    """The first line of a database error (libpq names host and port, never the password)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return f"PostgreSQL is unavailable: {first[:300]}"
