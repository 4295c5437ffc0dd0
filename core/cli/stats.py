"""``tenantq stats``: depth, oldest runnable age and throughput per queue and tenant.

The same numbers the metrics collector exports (``tenantq.store.stats``), at a terminal:
a table per queue, ``--watch`` to refresh it in place, ``--json`` for scripts.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from tenantq.formatting import format_age
from tenantq.quotas.tenants import limit_use_row
from tenantq.settings import Settings, load_settings
from tenantq.store import outbox as outbox_store
from tenantq.store import placement as placement_store
from tenantq.store import quotas as quota_store
from tenantq.store import stats
from tenantq.store.engine import DeploymentConnection, connect


def register(app: typer.Typer) -> None:
    """Add ``tenantq stats`` to the command line."""
    app.command("stats")(stats_command)


def stats_command(
    queue: list[str] | None = typer.Option(
        None,
        "--queue",
        "-q",
        metavar="QUEUE",
        help="Only this queue (repeatable); default: the declared queues.",
    ),
    top: int | None = typer.Option(
        None,
        "--top",
        min=0,
        metavar="N",
        help="Tenants shown by name per queue (default: metrics_top_tenants).",
    ),
    watch: bool = typer.Option(False, "--watch", "-w", help="Refresh in place until Ctrl-C."),
    interval: float = typer.Option(
        2.0, "--interval", min=0.2, metavar="SECONDS", help="Seconds between refreshes."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Per queue and tenant: depth, oldest runnable age, running, retrying, dead in the last
    hour and throughput per minute, read from Postgres."""
    settings = load_settings()
    queues = queue or sorted(settings.queues)
    top_tenants = settings.metrics_top_tenants if top is None else top
    # A database that is down, unmigrated or misnamed is one line (``tenantq.cli.errors``).
    _run(settings, queues, top_tenants, watch=watch, interval=interval, as_json=as_json)


def _run(
    settings: Settings,
    queues: list[str],
    top_tenants: int,
    *,
    watch: bool,
    interval: float,
    as_json: bool,
) -> None:
    with connect(settings, autocommit=True, application_name="tenantq-stats") as connection:

        def snapshot() -> dict[str, Any]:
            return take_snapshot(connection, settings, queues, top_tenants)

        if as_json and not watch:
            typer.echo(json.dumps(snapshot(), indent=2))
            return
        if as_json:
            _watch_json(snapshot, interval)
            return
        console = Console()
        if not watch:
            console.print(render(snapshot()))
            return
        with Live(render(snapshot()), console=console, auto_refresh=False) as live:
            try:
                while True:
                    time.sleep(interval)
                    live.update(render(snapshot()), refresh=True)
            except KeyboardInterrupt:
                pass


def take_snapshot(
    connection: DeploymentConnection, settings: Settings, queues: list[str], top_tenants: int
) -> dict[str, Any]:
    """The stats as plain data: what ``--json`` prints and the tables show, of the
    connection's deployment (the topic prefix) only."""
    queue_stats = stats.job_stats_by_tenant(connection, queues=queues, top_tenants=top_tenants)
    workers = stats.worker_summary(
        connection, stale_after_seconds=settings.worker.stale_owner_seconds
    )
    lag = outbox_store.outbox_lag(connection, queues)
    lanes = placement_store.lane_records(connection, queues)
    quota_use = quota_store.tenant_limit_use(connection, limit=QUOTA_ROWS_SHOWN)
    return {
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "deployment": connection.deployment,
        # Tenants in each queue's hot lane: who, moved by whom, since when and why.
        "hot_lane": {
            queue: [
                {
                    "tenant": record.tenant_id,
                    "by": "worker" if record.automatic else "operator",
                    "since": record.updated_at.isoformat(timespec="seconds")
                    if record.updated_at
                    else None,
                    "why": record.reason,
                }
                for record in lanes.get(queue, [])
            ]
            for queue in queues
        },
        # Jobs committed through tenantq.Outbox that the relay has not published yet.
        "outbox": {
            queue: {
                "unsent": lag[queue].unsent if queue in lag else 0,
                "lag_seconds": lag[queue].oldest_age_seconds if queue in lag else 0.0,
            }
            for queue in queues
        },
        # Tenants' limits (tenantq tenants) and what is in use of each now, fleet-wide.
        "quotas": {
            "defaults": settings.tenant_defaults.model_dump(),
            "limits": [limit_use_row(use) for use in quota_use],
        },
        "top_tenants": top_tenants,
        "workers": {
            "alive": workers.alive,
            "stale": workers.stale,
            "slots": workers.slots,
            "busy_slots": workers.busy_slots,
        },
        "queues": [
            {
                "queue": item.queue,
                **item.totals.as_dict(),
                "tenants": [
                    {
                        "tenant": tenant.tenant,
                        **tenant.totals.as_dict(),
                        "job_types": {
                            name: counts.as_dict() for name, counts in tenant.job_types.items()
                        },
                    }
                    for tenant in item.tenants.values()
                ],
            }
            for item in queue_stats
        ],
    }


#: The most limit rows ``tenantq stats`` lists (``tenantq tenants show`` lists them all).
QUOTA_ROWS_SHOWN = 200


def _watch_json(snapshot: Any, interval: float) -> None:
    # One JSON document per line, so `--watch --json | jq` streams.
    try:
        while True:
            typer.echo(json.dumps(snapshot(), separators=(",", ":")))
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


_COLUMNS = ("depth", "oldest runnable", "running", "retrying", "dead 1h", "done/min")


def _cells(counts: dict[str, Any]) -> list[str]:
    return [
        str(counts["depth"]),
        format_age(counts["oldest_runnable_age_seconds"]),
        str(counts["leased"]),
        str(counts["retrying"]),
        str(counts["dead_last_hour"]),
        str(counts["succeeded_last_minute"]),
    ]


def render(snapshot: dict[str, Any]) -> Group:
    """A table per queue (tenants, then the queue's total) and a line about workers."""
    tables: list[Any] = []
    for item in snapshot["queues"]:
        table = Table(title=f"queue {item['queue']}", title_justify="left")
        table.add_column("tenant")
        for column in _COLUMNS:
            table.add_column(column, justify="right")
        for tenant in item["tenants"]:
            table.add_row(tenant["tenant"], *_cells(tenant))
        table.add_section()
        table.add_row("[bold]total[/]", *_cells(item))
        tables.append(table)
    quotas = _quota_table(snapshot.get("quotas", {}).get("limits", []))
    if quotas is not None:
        tables.append(quotas)
    tables.append(_outbox_line(snapshot.get("outbox", {})))
    tables.append(_lane_line(snapshot.get("hot_lane", {})))
    workers = snapshot["workers"]
    deployment = snapshot.get("deployment")
    tables.append(
        (f"deployment {deployment}: " if deployment else "")
        + f"workers: {workers['alive']} alive, {workers['stale']} stale, "
        f"{workers['busy_slots']}/{workers['slots']} slots busy  ({snapshot['at']})"
    )
    return Group(*tables)


def _lane_line(lanes: dict[str, list[dict[str, Any]]]) -> str:
    """``hot lane: default acme (worker: held 93% of partition 3's ...)`` or that it is empty."""
    members = [
        f"{queue} {member['tenant']} ({member['by']}: {member['why'] or 'no reason given'})"
        for queue, found in lanes.items()
        for member in found
    ]
    return "hot lane: " + ("; ".join(members) if members else "no tenant")


def _outbox_line(outbox: dict[str, Any]) -> str:
    """``outbox: default 12 unsent, oldest 3s`` per queue with a backlog, else that none is."""
    waiting = [
        f"{queue} {item['unsent']} unsent, oldest {format_age(item['lag_seconds'])}"
        for queue, item in outbox.items()
        if item["unsent"]
    ]
    return "outbox: " + ("; ".join(waiting) if waiting else "nothing waiting for the relay")


def _quota_table(limits: list[dict[str, Any]]) -> Table | None:
    """Tenants' limits and their use now (running against the cap, the rate's burst left,
    the last time a claim held one of their jobs back); None when no tenant has limits."""
    if not limits:
        return None
    table = Table(title="tenant quotas (fleet-wide)", title_justify="left")
    for column in ("tenant", "queue", "job type", "running / max", "rate", "weight"):
        table.add_column(column)
    table.add_column("last held back")
    for row in limits:
        cap = row["max_running"]
        rate = "-"
        if row["rate"] is not None:
            left = row["burst_left"]
            rate = f"{row['rate']:g}/s" + (
                f" ({left:.0f} of {row['burst'] or 1} left)" if left is not None else ""
            )
        held = "-"
        if row["throttled_reason"] and row["throttled_seconds_ago"] is not None:
            held = f"{row['throttled_reason']}, {format_age(row['throttled_seconds_ago'])} ago"
        table.add_row(
            row["tenant"],
            row["queue"],
            row["job_type"],
            f"{row['running']} / {cap if cap is not None else '-'}",
            rate,
            "-" if row["weight"] is None else str(row["weight"]),
            held,
        )
    return table
