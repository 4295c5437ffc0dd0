"""The ``tenantq`` command line. Each command group lives in its own module here; how a
command ends on an error (one line, a non-zero status) is ``errors.OneLineErrors``."""

from __future__ import annotations

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
    tenants,
    web,
    worker,
)
from tenantq.cli.errors import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,
    name="tenantq",
    help="Background jobs over Apache Kafka, with PostgreSQL as the source of truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(dev.dev_app, name="dev")
app.add_typer(infra.db_app, name="db")
app.add_typer(infra.topics_app, name="topics")
for commands in (
    enqueue,
    placement,
    tenants,
    worker,
    dlq,
    stats,
    demo,
    web,
    outbox,
    periodic,
    prune,
):
    commands.register(app)


def main() -> None:
    """Entry point: errors are one line on stderr and a non-zero status (``OneLineErrors``)."""
    app()
