"""How a command ends when it cannot do its work: one line on stderr and a non-zero status,
never a traceback for anything an operator can cause.

Every command runs inside ``OneLineErrors.invoke`` (the root group of ``tenantq``), so no
command prints its own errors:

| error | the line | status |
| --- | --- | --- |
| a bad option or argument | ``tenantq dlq replay: Invalid value for '--rate': ...`` | 2 |
| ``TenantqError`` (settings, input, a DLQ that cannot be read) | ``tenantq: <its message>`` | 2 |
| PostgreSQL unreachable, refusing or failing | ``tenantq: PostgreSQL at host:port/db: ...`` | 2 |
| Kafka refusing or failing (``KafkaException``) | ``tenantq: Kafka at <servers>: ...`` | 2 |
| anything else | the traceback: a bug of tenantq's, to report | 1 |

The lines name the server but never a password: the database is named by host, port and
database, and the password, if the settings hold one, is masked wherever it appears.
"""

from __future__ import annotations

from typing import Any, cast

import psycopg
import sqlalchemy.exc
import typer
from confluent_kafka import KafkaError, KafkaException
from sqlalchemy.engine import make_url
from typer.core import TyperGroup

from tenantq.errors import TenantqError
from tenantq.settings import load_settings

#: Longest line printed for an error: libpq and librdkafka can say a lot.
LINE_LIMIT = 500
EXIT_FAILED = 2

# The usage error class of the click that typer runs on (its own copy since typer 0.2x):
# the class ``typer.BadParameter`` derives from.
_USAGE_ERROR = cast(
    "type[Exception]",
    next(kind for kind in typer.BadParameter.__mro__ if kind.__name__ == "UsageError"),
)


class OneLineErrors(TyperGroup):
    """The root command group: turns what a command raises into one line and a status (see
    the module docstring)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except _USAGE_ERROR as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # a group without a command: help
                raise
            context = getattr(error, "ctx", None)
            command = context.command_path if context is not None else "tenantq"
            message = getattr(error, "format_message", error.__str__)()
            _fail(f"{command}: {_one_line(message)} (see --help)", getattr(error, "exit_code", 2))
        except Exception as error:
            line = describe(error)
            if line is None:
                raise
            _fail(f"tenantq: {line}", EXIT_FAILED)


def describe(error: BaseException) -> str | None:
    """The line for an error an operator can cause, or None for a bug (see the table)."""
    if isinstance(error, sqlalchemy.exc.DBAPIError) and isinstance(error.orig, psycopg.Error):
        error = error.orig
    if isinstance(error, TenantqError):
        return _one_line(str(error))
    if isinstance(error, psycopg.errors.UndefinedTable):
        return _one_line(
            f"PostgreSQL at {_database()}: the tenantq tables are missing; run `tenantq db upgrade`"
        )
    if isinstance(error, psycopg.Error | sqlalchemy.exc.DBAPIError):
        return _one_line(f"PostgreSQL at {_database()}: {error}")
    if isinstance(error, KafkaException):
        argument = error.args[0] if error.args else None
        text = argument.str() if isinstance(argument, KafkaError) else str(error)
        return _one_line(f"Kafka at {_kafka()}: {text}")
    return None


def _fail(line: str, status: int) -> None:
    typer.echo(line, err=True)
    raise typer.Exit(status)


def _one_line(text: str) -> str:
    line = _masked(" ".join(text.split()))
    return line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 1] + "…"


def _database() -> str:
    """``host:port/database`` of the configured database, without user or password."""
    try:
        url = make_url(load_settings().require_database_url())
        return f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"
    except Exception:  # unreadable settings: the line still says which server it is about
        return "TENANTQ_DATABASE_URL"


def _kafka() -> str:
    try:
        return load_settings().require_bootstrap_servers()
    except Exception:
        return "TENANTQ_KAFKA_BOOTSTRAP_SERVERS"


def _masked(line: str) -> str:
    """``line`` with the database password, if one is configured, replaced by ``***``."""
    try:
        password = make_url(load_settings().require_database_url()).password
    except Exception:
        return line
    return line.replace(password, "***") if password else line
