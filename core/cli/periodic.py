"""``tenantq periodic list``: each schedule, its last and next run."""

from __future__ import annotations

import datetime as dt
import json

import typer
from rich.console import Console
from rich.table import Table

from tenantq.settings import load_settings
from tenantq.store.engine import connect
from tenantq.store.periodic import periodic_list

console = Console()
periodic_app = typer.Typer(help="Periodic jobs declared with app.periodic(...).")


def register(app: typer.Typer) -> None:
    """Add ``tenantq periodic`` to the command line."""
    app.add_typer(periodic_app, name="periodic")


@periodic_app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every schedule the workers registered: job type, tenant, queue, schedule, last tick
    enqueued (and its job), next tick."""
    settings = load_settings()
    with connect(settings, autocommit=True, application_name="tenantq-cli") as connection:
        rows = periodic_list(connection)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "name": row.name,
                        "job_type": row.job_type,
                        "tenant": row.tenant_id,
                        "queue": row.queue,
                        "schedule": row.schedule,
                        "catch_up": row.catch_up,
                        "last_tick": _iso(row.last_tick),
                        "last_job_id": str(row.last_job_id) if row.last_job_id else None,
                        "next_tick": _iso(row.next_tick),
                        "updated_at": _iso(row.updated_at),
                    }
                    for row in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        console.print("no periodic schedules (a worker registers its app's at start)")
        return
    table = Table("name", "job type", "tenant", "queue", "schedule", "last run", "next run")
    for row in rows:
        last = _iso(row.last_tick) or "-"
        if row.last_job_id is not None:
            last += f"\n{row.last_job_id}"
        schedule = row.schedule + (" (catch up)" if row.catch_up else "")
        table.add_row(
            row.name, row.job_type, row.tenant_id, row.queue, schedule, last, _iso(row.next_tick)
        )
    console.print(table)


def _iso(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
