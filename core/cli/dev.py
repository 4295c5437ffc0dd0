"""``tenantq dev``: the local dev stack (Apache Kafka brokers and PostgreSQL servers)."""

from __future__ import annotations

import json
import time

import typer
from rich.console import Console
from rich.table import Table

from tenantq.devstack.stack import DevStack, external_endpoints
from tenantq.devstack.status import StackStatus
from tenantq.devstack.topology import DEFAULT_KAFKA_VERSION
from tenantq.settings import load_settings

console = Console()
dev_app = typer.Typer(help="The local dev stack: Apache Kafka brokers and PostgreSQL.")


def _stack() -> DevStack:
    # The same TENANTQ_DEV_HOME the settings read, so commands and the stack agree.
    return DevStack(load_settings().dev_home)


@dev_app.command("up")
def dev_up(
    brokers: int | None = typer.Option(
        None, "--brokers", help="Kafka brokers: 1, or 3 for a KRaft cluster (default: as recorded)."
    ),
    standby: bool | None = typer.Option(
        None, "--standby/--no-standby", help="A streaming standby of PostgreSQL."
    ),
    secure: bool | None = typer.Option(
        None,
        "--secure/--no-secure",
        help="SASL_SSL (SCRAM-SHA-512) brokers and PostgreSQL over TLS with a password.",
    ),
    kafka_version: str | None = typer.Option(
        None,
        "--kafka-version",
        help=(
            f"Apache Kafka version of the brokers, kept for this home (without it: "
            f"{DEFAULT_KAFKA_VERSION}, and a home that never named one moves to it)."
        ),
    ),
    timeout: float = typer.Option(120.0, help="Seconds to wait for each server."),
) -> None:
    """Start Kafka and PostgreSQL (unless TENANTQ_* names other servers). Idempotent: starts
    again whatever process of the topology is missing. Options change the home's topology
    (recorded; a plain `dev up` keeps it); a new shape of brokers needs `dev down` first.
    A newer Kafka of the same major restarts the brokers on their storage."""
    kafka, database = external_endpoints()
    started = time.monotonic()
    stack = _stack()
    before = stack.topology()
    with console.status("starting the dev stack (the first run downloads Kafka with mvn)"):
        timings = stack.up(
            external_kafka=kafka,
            external_database=database,
            timeout=timeout,
            brokers=brokers,
            standby=standby,
            secure=secure,
            kafka_version=kafka_version,
        )
    parts = [f"{name} {seconds:.1f}s" for name, seconds in timings.items()]
    if "kafka" not in timings:
        parts.append("kafka external")
    if "postgres" not in timings:
        parts.append("postgres external")
    console.print(f"dev stack up in {time.monotonic() - started:.1f}s ({', '.join(parts)})")
    topology = stack.topology()
    if before is not None and topology is not None and before.upgrades_in_place(topology):
        console.print(
            f"Kafka moved from {before.kafka_version} to {topology.kafka_version} on its storage"
        )
    if topology is not None and topology.kafka_version != DEFAULT_KAFKA_VERSION:
        console.print(
            f"Kafka {topology.kafka_version} (pinned for this home; the default is "
            f"{DEFAULT_KAFKA_VERSION}: `tenantq dev up --kafka-version {DEFAULT_KAFKA_VERSION}` "
            "moves a 4.x home on its storage, another needs `tenantq dev down` first)"
        )
    _print_table(_status(stack))


@dev_app.command("down")
def dev_down() -> None:
    """Stop what `dev up` started."""
    stopped = _stack().down()
    console.print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")


@dev_app.command("status")
def dev_status(
    as_json: bool = typer.Option(
        False,
        "--json",
        help="A JSON list, one object per server process: server, role, node, pid, endpoint, "
        "running, healthy, managed.",
    ),
) -> None:
    """Show each server process, its role, endpoint, pid and health; exit 1 when one is
    unhealthy (the JSON is printed either way)."""
    status = _status(_stack())
    if as_json:
        typer.echo(json.dumps([process.as_json() for process in status.processes], indent=2))
    else:
        _print_table(status)
    if not status.healthy:
        raise typer.Exit(1)


@dev_app.command("env")
def dev_env() -> None:
    """Print `export` lines that point tenantq at the running dev stack (with a secure stack,
    its passwords: this is for your shell, not for a log)."""
    for line in _stack().env_lines():
        typer.echo(line)


@dev_app.command("failover")
def dev_failover(
    immediate: bool = typer.Option(
        False,
        "--immediate",
        help="Stop the primary as a crash would (what it had not streamed yet is lost), "
        "not with a clean shutdown.",
    ),
) -> None:
    """Stop the PostgreSQL primary and promote its standby. `dev up` then makes the old
    primary the new standby."""
    seconds = _stack().failover(immediate=immediate)
    console.print(f"promoted the standby; it took writes {seconds:.2f}s after the stop began")
    _print_table(_status(_stack()))


def _status(stack: DevStack) -> StackStatus:
    kafka, database = external_endpoints()
    return stack.status(external_kafka=kafka, external_database=database)


def _print_table(status: StackStatus) -> None:
    table = Table("server", "node", "role", "endpoint", "pid", "managed", "healthy", "detail")
    for process in status.processes:
        table.add_row(
            process.server,
            process.node,
            process.role,
            process.endpoint,
            str(process.pid or "-"),
            "yes" if process.managed else "external",
            "[green]yes[/]" if process.healthy else "[red]no[/]",
            process.detail,
        )
    console.print(table)
