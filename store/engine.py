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
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg.rows import TupleRow
from sqlalchemy import URL, Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from tenantq.errors import ConfigurationError, DatabaseAccessRefused
from tenantq.settings import Settings
from tenantq.store.transient import is_access_refused, refused_access_line


def parse_database_url(database_url: str) -> URL:
    """The URL parsed (several hosts as in ``_multi_host_url``), or a ``ConfigurationError``
    that says what is expected without repeating the value (it may hold a password)."""
    try:
        url = _multi_host_url(database_url)
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
    """``postgresql://`` URLs use the psycopg 3 driver (TLS options in the query pass through;
    several hosts as ``host=h1,h2&port=p1,p2``, see ``database_url``)."""
    url = parse_database_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def psycopg_url(database_url: str) -> str:
    """A libpq URL (psycopg does not accept SQLAlchemy's ``+driver`` suffix). Query values are
    percent-encoded, as libpq decodes them (it reads ``+`` as a plus sign, not a space)."""
    url = parse_database_url(database_url)
    credentials = ""
    if url.username is not None:
        credentials = quote(url.username, safe="")
        if url.password is not None:
            credentials += ":" + quote(str(url.password), safe="")
        credentials += "@"
    location = ""
    if url.host:
        location = f"[{url.host}]" if ":" in url.host else url.host
        if url.port is not None:
            location += f":{url.port}"
    text = f"postgresql://{credentials}{location}/{quote(url.database or '', safe='')}"
    pairs = [
        (key, value)
        for key, values in url.query.items()
        for value in (values if isinstance(values, tuple) else (values,))
    ]
    if pairs:
        text += "?" + "&".join(f"{key}={quote(value, safe=',/')}" for key, value in pairs)
    return text


def _multi_host_url(database_url: str) -> URL:
    """``database_url`` as a SQLAlchemy URL, with several hosts always in the query as
    ``host=h1,h2&port=p1,p2`` (libpq's multi-host form, which SQLAlchemy's psycopg dialect
    reads too). Also accepted: libpq's ``postgresql://user@h1:p1,h2:p2/db``, which SQLAlchemy
    cannot parse, and SQLAlchemy's ``?host=h1:p1&host=h2:p2``, which libpq cannot.
    ``target_session_attrs=read-write`` in the query makes a client skip a standby."""
    url = make_url(_hosts_into_query(database_url))
    hosts = url.query.get("host")
    if isinstance(hosts, tuple):
        pairs = [host.rpartition(":")[::2] if ":" in host else (host, "") for host in hosts]
        query = dict(url.query)
        query["host"] = ",".join(name for name, _ in pairs)
        if any(port for _, port in pairs):
            query["port"] = ",".join(port for _, port in pairs)
        url = url.set(query=query)
    return url


def _hosts_into_query(database_url: str) -> str:
    """libpq's ``user@h1:p1,h2:p2`` netloc moved into ``?host=h1,h2&port=p1,p2``."""
    parts = urlsplit(database_url)
    userinfo, at, hostports = parts.netloc.rpartition("@")
    if "," not in hostports:
        return database_url
    hosts, ports = [], []
    for item in hostports.split(","):
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        hosts.append(host)
        ports.append(port)
    query = f"host={','.join(hosts)}"
    if any(ports):
        query += f"&port={','.join(ports)}"
    if parts.query:
        query += f"&{parts.query}"
    return urlunsplit((parts.scheme, userinfo + at, parts.path, query, parts.fragment))


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


def check_database_access(settings: Settings, *, timeout_seconds: int = 10) -> bool:
    """Connect once, as a starting process does: raises ``DatabaseAccessRefused`` (one line naming
    the server) when the server refuses the credentials, TLS or database name; returns True
    when it let the client in, False when it could not be reached (weather: the process
    starts and waits for it as it would for any outage)."""
    try:
        connection = connect(
            settings,
            application_name="tenantq-access-check",
            connect_timeout_seconds=timeout_seconds,
        )
    except psycopg.OperationalError as error:
        if is_access_refused(error):
            raise DatabaseAccessRefused(refused_access_line(error)) from None
        return False
    connection.close()
    return True


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
