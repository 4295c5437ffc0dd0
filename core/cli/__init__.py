"""The ``tenantq`` command line. Each command group lives in its own module here."""

from __future__ import annotations

import sys

import typer

from tenantq.cli import (
    demo,
    dev,
    dlq,
    enqueue,
    infra,
    outbox,
    periodic,
    placement,
    prune,
    stats,
    web,
    worker,
)
from tenantq.errors import TenantqError

app = typer.Typer(
    name="tenantq",
    help="Background jobs over Apache Kafka, with PostgreSQL as the source of truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(dev.dev_app, name="dev")
app.add_typer(infra.db_app, name="db")
app.add_typer(infra.topics_app, name="topics")
for commands in (enqueue, placement, worker, dlq, stats, demo, web, outbox, periodic, prune):
    commands.register(app)


def main() -> None:
    """Entry point: a tenantq error is one line on stderr and exit code 2, not a traceback."""
    try:
        app()
    except TenantqError as error:
        typer.echo(f"tenantq: {error}", err=True)
        sys.exit(2)
