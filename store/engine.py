"""Database connections: a SQLAlchemy engine for migrations and admin work, and plain psycopg
connections for the hot path (named statements in ``tenantq.store.statements``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from tenantq.settings import Settings


def sqlalchemy_url(database_url: str) -> str:
    """``postgresql://`` URLs use the psycopg 3 driver (TLS options in the query pass through)."""
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def psycopg_url(database_url: str) -> str:
    """A libpq URL (psycopg does not accept SQLAlchemy's ``+driver`` suffix)."""
    url = make_url(database_url)
    if "+" in url.drivername:
        url = url.set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def create_sqlalchemy_engine(settings: Settings, **kwargs: Any) -> Engine:
    return create_engine(sqlalchemy_url(settings.require_database_url()), **kwargs)


def connect(
    settings: Settings,
    *,
    autocommit: bool = False,
    application_name: str = "tenantq",
    custom_plans: bool = False,
) -> psycopg.Connection[Any]:
    """A psycopg connection with tenantq's session settings. ``custom_plans``: plan every
    execution of a prepared statement with its parameters (the worker's batch statements)."""
    # A statement that runs this long is a bug, not load: fail it rather than pile up.
    options = "-c statement_timeout=60000 -c idle_in_transaction_session_timeout=60000"
    if custom_plans:
        # psycopg prepares a statement on its fifth run, and Postgres then may switch to a
        # generic plan, which reckons an unnest() of any array at 10 rows: it drove the
        # completion through every lease of the worker for each result, quadratic in the
        # batch (162 ms for 1,000 results). A custom plan sees the arrays' length and hashes.
        options += " -c plan_cache_mode=force_custom_plan"
    return psycopg.connect(
        psycopg_url(settings.require_database_url()),
        autocommit=autocommit,
        application_name=application_name,
        connect_timeout=10,
        options=options,
    )


class LazyConnection:
    """The one connection of a long-lived service: opened when first needed, and again after
    ``close`` (a failed round drops it; the next round opens a fresh one). ``on_open`` runs on
    every new connection (register what the service needs, forget what the last one held)."""

    def __init__(
        self,
        settings: Settings,
        application_name: str,
        *,
        autocommit: bool = False,
        on_open: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        self._settings = settings
        self._application_name = application_name
        self._autocommit = autocommit
        self._on_open = on_open
        self._connection: psycopg.Connection[Any] | None = None

    @property
    def is_open(self) -> bool:
        return self._connection is not None and not self._connection.closed

    def get(self) -> psycopg.Connection[Any]:
        """The connection, opened (and ``on_open`` run) if there is none."""
        if self._connection is None or self._connection.closed:
            self._connection = connect(
                self._settings,
                autocommit=self._autocommit,
                application_name=self._application_name,
            )
            if self._on_open is not None:
                self._on_open(self._connection)
        return self._connection

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
