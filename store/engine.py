"""Database connections: a SQLAlchemy engine for migrations and admin work, and plain psycopg
connections for the hot path (named statements in ``tenantq.store.statements``).

Every psycopg connection tenantq opens is a ``DeploymentConnection``: it carries the
deployment (the settings' topic prefix) it was opened for, and the statements of
``tenantq.store`` take their deployment from it. Deployments that share a database never see
or touch each other's rows, and no caller names the deployment (or can name another): it is
bound where the connection is opened, from the settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from sqlalchemy import URL, Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from tenantq.errors import ConfigurationError
from tenantq.settings import Settings


def parse_database_url(database_url: str) -> URL:
    """The URL parsed, or a ``ConfigurationError`` that says what is expected without
    repeating the value (it may hold a password)."""
    try:
        url = make_url(database_url)
    except (ArgumentError, ValueError):
        url = None
    if url is None or url.drivername.split("+")[0] not in ("postgresql", "postgres"):
        raise ConfigurationError(
            "TENANTQ_DATABASE_URL is not a PostgreSQL URL: expected "
            "postgresql://user:password@host:port/database (the value is not shown: it may "
            "hold a password)"
        )
    return url


def sqlalchemy_url(database_url: str) -> str:
    """``postgresql://`` URLs use the psycopg 3 driver (TLS options in the query pass through)."""
    url = parse_database_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def psycopg_url(database_url: str) -> str:
    """A libpq URL (psycopg does not accept SQLAlchemy's ``+driver`` suffix)."""
    url = parse_database_url(database_url)
    if "+" in url.drivername:
        url = url.set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class DeploymentConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection bound to one deployment (a topic prefix), opened by ``connect``.

    The statements of ``tenantq.store`` read ``deployment`` from the connection they run on,
    so a connection of one deployment cannot reach another's jobs, placements, workers,
    schedules, outbox entries or audit rows."""

    #: The topic prefix of the settings the connection was opened with.
    deployment: str


def create_sqlalchemy_engine(settings: Settings, **kwargs: Any) -> Engine:
    return create_engine(sqlalchemy_url(settings.require_database_url()), **kwargs)


def connect(
    settings: Settings,
    *,
    autocommit: bool = False,
    application_name: str = "tenantq",
    generic_plans: bool = False,
    connect_timeout_seconds: int = 10,
) -> DeploymentConnection:
    """A psycopg connection with tenantq's session settings, bound to the settings'
    deployment (``settings.topic_prefix``). ``generic_plans``: plan each statement once and
    run every execution on that plan (the worker's batch statements)."""
    # A statement that runs this long is a bug, not load: fail it rather than pile up.
    options = "-c statement_timeout=60000 -c idle_in_transaction_session_timeout=60000"
    # Timestamps come back in UTC whatever the server's zone: psycopg maps the session's
    # 'UTC' to ``datetime.timezone.utc``, while a zone name (the server default, often
    # 'Etc/UTC') becomes a ``ZoneInfo``, which made loading a timestamptz 2-3x dearer
    # (0.8 us of the 1.8 per claimed job for the claim's two).
    options += " -c TimeZone=UTC"
    if generic_plans:
        # Planning the batch statements took 0.2-0.3 ms of the server per execution, and
        # custom plans, which see the arrays' length, took 400 us per result at 1,000 results.
        # The statements find their rows by primary key only (statements._RESULTS), so the
        # generic plan is linear at any size.
        #
        # A generic plan is made from the statistics of the moment it is prepared. On a new
        # deployment's empty, never-analysed table a sequential scan looks cheapest, and every
        # result batch then read the whole table (823 us of the server per job once it held
        # 100,000 rows). With sequential scans priced out the plan is the primary-key probe
        # whatever the statistics; a statement no index serves still runs, by a scan.
        options += " -c plan_cache_mode=force_generic_plan -c enable_seqscan=off"
    connection = DeploymentConnection.connect(
        psycopg_url(settings.require_database_url()),
        autocommit=autocommit,
        application_name=application_name,
        connect_timeout=connect_timeout_seconds,
        options=options,
    )
    connection.deployment = settings.topic_prefix
    if generic_plans:
        # Prepared at the first execution, not the fifth: the plan is made once per statement.
        connection.prepare_threshold = 0
    return connection


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
        on_open: Callable[[DeploymentConnection], None] | None = None,
    ) -> None:
        self._settings = settings
        self._application_name = application_name
        self._autocommit = autocommit
        self._on_open = on_open
        self._connection: DeploymentConnection | None = None

    @property
    def is_open(self) -> bool:
        return self._connection is not None and not self._connection.closed

    def get(self) -> DeploymentConnection:
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
