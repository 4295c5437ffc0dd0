"""``tenantq dev``, ``tenantq db`` and ``tenantq topics``: the infrastructure commands."""

from __future__ import annotations

import json
import time

import typer
from rich.console import Console
from rich.table import Table

from tenantq.devstack.stack import DevStack
from tenantq.settings import Settings, load_settings

console = Console()
dev_app = typer.Typer(help="The local dev stack: the Apache Kafka broker and PostgreSQL.")
db_app = typer.Typer(help="Database schema migrations.")
topics_app = typer.Typer(help="Kafka topics of every queue.")


def _stack() -> DevStack:
    # The same TENANTQ_DEV_HOME the settings read, so commands and the stack agree.
    return DevStack(load_settings().dev_home)


@dev_app.command("up")
def dev_up(timeout: float = typer.Option(120.0, help="Seconds to wait for each server.")) -> None:
    """Start Kafka and PostgreSQL (unless TENANTQ_* names external servers); idempotent."""
    from tenantq.devstack.stack import external_endpoints

    kafka, database = external_endpoints()
    started = time.monotonic()
    with console.status("starting the dev stack (the first run downloads Kafka with mvn)"):
        timings = _stack().up(external_kafka=kafka, external_database=database, timeout=timeout)
    parts = [f"{name} {seconds:.1f}s" for name, seconds in timings.items()]
    if kafka:
        parts.append("kafka external")
    if database:
        parts.append("postgres external")
    console.print(f"dev stack up in {time.monotonic() - started:.1f}s ({', '.join(parts)})")
    _print_status()


@dev_app.command("down")
def dev_down() -> None:
    """Stop what `dev up` started."""
    stopped = _stack().down()
    console.print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")


@dev_app.command("status")
def dev_status() -> None:
    """Show each server, its endpoint, pid and health; exit 1 when one is unhealthy."""
    if not _print_status():
        raise typer.Exit(1)


@dev_app.command("env")
def dev_env() -> None:
    """Print `export` lines that point tenantq at the running dev stack."""
    for line in _stack().env_lines():
        typer.echo(line)


def _print_status() -> bool:
    from tenantq.devstack.stack import external_endpoints

    kafka, database = external_endpoints()
    status = _stack().status(external_kafka=kafka, external_database=database)
    table = Table("server", "endpoint", "pid", "managed", "healthy", "detail")
    for component in (status.kafka, status.postgres):
        table.add_row(
            component.name,
            component.endpoint,
            str(component.pid or "-"),
            "yes" if component.managed else "external",
            "[green]yes[/]" if component.healthy else "[red]no[/]",
            component.detail,
        )
    console.print(table)
    return status.healthy


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
        table.add_row(spec.name, str(spec.partitions), str(spec.replication_factor))
    console.print(table)
