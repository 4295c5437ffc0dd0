"""``tenantq db`` and ``tenantq topics``: the schema and topic commands."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from tenantq.settings import Settings, load_settings

console = Console()
db_app = typer.Typer(help="Database schema migrations.")
topics_app = typer.Typer(help="Kafka topics of every queue.")


def _settings() -> Settings:
    return load_settings()


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head")) -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    from tenantq.store import migrate

    console.print(f"database at revision {migrate.upgrade_database(_settings(), revision)}")


@db_app.command("current")
def db_current() -> None:
    """Print the database's revision and the newest one shipped."""
    from tenantq.store import migrate
    from tenantq.store.engine import create_sqlalchemy_engine

    engine = create_sqlalchemy_engine(_settings())
    try:
        current = migrate.current(engine)
    finally:
        engine.dispose()
    head = migrate.head()
    state = "up to date" if current == head else "needs `tenantq db upgrade`"
    console.print(f"current {current or '(empty)'}; head {head} ({state})")


@topics_app.command("ensure")
def topics_ensure(
    queue: list[str] = typer.Option(None, "--queue", "-q", help="Only these queues."),
) -> None:
    """Create missing topics of every declared queue; exit 2 on drift."""
    from tenantq.topic_admin import ensure_topics

    report = ensure_topics(_settings(), queue or None)
    console.print(f"created {len(report.created)}, existing {len(report.existing)}")
    for name in report.created:
        console.print(f"  + {name}")


@topics_app.command("list")
def topics_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Show every declared topic with its partitions."""
    from tenantq.topic_admin import declared_topics

    specs = declared_topics(_settings())
    if as_json:
        typer.echo(json.dumps([spec.__dict__ for spec in specs], indent=2))
        return
    table = Table("topic", "partitions", "replication")
    for spec in specs:
        replication = str(spec.replication_factor or "the cluster's")
        table.add_row(spec.name, str(spec.partitions), replication)
    console.print(table)
