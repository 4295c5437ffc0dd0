"""``tenantq tenants``: tenants' limits (running cap, start rate, weight), set without a deploy
and held across every worker (``tenantq.Tenants``; docs/quotas.md).

Every value an operator types is checked before it reaches the database; a mistake ends the
command with one line (``tenantq.cli.errors``).
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tenantq.formatting import format_age
from tenantq.quotas.tenants import KEEP, Tenants, limit_use_row
from tenantq.settings import TenantDefaults, load_settings
from tenantq.store.quotas import LimitUse
from tenantq.tenant_limits import ANY

console = Console()
tenants_app = typer.Typer(
    help="Tenants' limits: the most they run at once and start per second across the fleet, "
    "and their weight when tenants wait for one queue.",
    no_args_is_help=True,
)

#: What an option takes to remove a limit (rather than set it).
REMOVE = "none"


def register(app: typer.Typer) -> None:
    """Add ``tenantq tenants`` to the command line."""
    app.add_typer(tenants_app, name="tenants")


def _value(text: str | None) -> Any:
    """An option's value for ``Tenants.set``: absent = keep, ``none`` = remove, else the text
    (checked there)."""
    if text is None:
        return KEEP
    if text.strip().lower() == REMOVE:
        return None
    return text.strip()


@tenants_app.command("set")
def tenants_set(
    tenant: str = typer.Argument(..., help="The tenant id."),
    queue: str = typer.Option(ANY, "--queue", "-q", help="Only jobs of this queue ('*': any)."),
    job_type: str = typer.Option(ANY, "--job-type", "-t", help="Only this job type ('*': any)."),
    max_running: str | None = typer.Option(
        None, "--max-running", metavar="N", help="At most N attempts running at once ('none')."
    ),
    rate: str | None = typer.Option(
        None, "--rate", metavar="R", help="At most R attempts started per second ('none')."
    ),
    burst: str | None = typer.Option(
        None, "--burst", metavar="B", help="Starts above the rate allowed at once (default 1)."
    ),
    weight: str | None = typer.Option(
        None, "--weight", metavar="W", help="Share of a queue when tenants wait (default 1)."
    ),
) -> None:
    """Set limits of TENANT (of one queue or job type with --queue, --job-type). Limits not
    given stay as they are; 'none' removes one. Every worker applies them within a second."""
    given = {"max_running": max_running, "rate": rate, "burst": burst, "weight": weight}
    if all(value is None for value in given.values()):
        raise typer.BadParameter("give at least one of --max-running, --rate, --burst, --weight")
    tenants = Tenants(settings=load_settings())
    row = tenants.set(
        tenant, queue=queue, job_type=job_type, **{name: _value(v) for name, v in given.items()}
    )
    scope = _scope(tenant, queue, job_type)
    if row is None:
        console.print(f"{scope}: no limits left (the defaults apply)", highlight=False)
        return
    console.print(f"{scope}: {_limits_text(row.max_running, row.rate, row.burst, row.weight)}")


@tenants_app.command("show")
def tenants_show(
    tenant: str | None = typer.Argument(None, help="Only this tenant (default: every tenant)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tenants' limits and what is in use now: attempts running, the rate's burst left, when
    and why a claim last held a job back."""
    settings = load_settings()
    tenants = Tenants(settings=settings)
    defaults = settings.tenant_defaults
    if tenant is not None:
        view = tenants.show(tenant)
        if as_json:
            typer.echo(json.dumps(view.as_dict(), indent=2))
            return
        rows = list(view.rows)
        if view.default_use is not None:
            rows.insert(0, view.default_use)
        console.print(_table(rows, defaults))
        return
    uses = tenants.show_all()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "defaults": defaults.model_dump(),
                    "limits": [limit_use_row(use) for use in uses],
                },
                indent=2,
            )
        )
        return
    if not uses:
        console.print(f"no tenant has limits of its own; defaults: {_defaults_text(defaults)}")
        return
    console.print(_table(uses, defaults))
    console.print(f"defaults (tenants without a row): {_defaults_text(defaults)}", highlight=False)


@tenants_app.command("clear")
def tenants_clear(
    tenant: str = typer.Argument(..., help="The tenant id."),
    queue: str | None = typer.Option(None, "--queue", "-q", help="Only the rows of this queue."),
    job_type: str | None = typer.Option(
        None, "--job-type", "-t", help="Only the rows of this job type."
    ),
) -> None:
    """Remove TENANT's limits (all of them, or those of --queue / --job-type): the defaults
    apply again."""
    tenants = Tenants(settings=load_settings())
    removed = tenants.clear(tenant, queue=queue, job_type=job_type)
    scope = _scope(tenant, queue or ANY, job_type or ANY)
    console.print(
        f"{scope}: {len(removed)} row(s) removed" if removed else f"{scope}: had no limits",
        highlight=False,
    )


def _scope(tenant: str, queue: str, job_type: str) -> str:
    parts = [tenant]
    if queue != ANY:
        parts.append(f"queue {queue}")
    if job_type != ANY:
        parts.append(f"job type {job_type}")
    return ", ".join(parts)


def _limits_text(
    max_running: int | None, rate: float | None, burst: int | None, weight: int | None
) -> str:
    parts = []
    if max_running is not None:
        parts.append(f"at most {max_running} running")
    if rate is not None:
        parts.append(f"{rate:g} starts/s (burst {burst or 1})")
    if weight is not None:
        parts.append(f"weight {weight}")
    return ", ".join(parts) or "no limits"


def _defaults_text(defaults: TenantDefaults) -> str:
    return _limits_text(defaults.max_running, defaults.rate, defaults.burst, defaults.weight)


def _table(uses: list[LimitUse], defaults: TenantDefaults) -> Table:
    table = Table(
        "tenant", "queue", "job type", "running / max", "rate (burst left)", "weight",
        "last held back", "set by",
    )  # fmt: skip
    for use in uses:
        limit = use.limit
        from_defaults = limit.empty  # a tenant without a tenant-wide row: the defaults
        cap = defaults.max_running if from_defaults else limit.max_running
        rate = defaults.rate if from_defaults else limit.rate
        weight = defaults.weight if from_defaults else limit.weight
        burst = (defaults.burst if from_defaults else limit.burst) or 1
        rate_text = "-" if rate is None else f"{rate:g}/s (burst {burst})"
        if use.burst_left is not None:
            rate_text = f"{rate:g}/s ({use.burst_left:.0f} of {burst} left)"
        held = "-"
        if use.throttled_reason and use.throttled_seconds_ago is not None:
            held = f"{use.throttled_reason}, {format_age(use.throttled_seconds_ago)} ago"
        table.add_row(
            limit.tenant_id + (" (defaults)" if from_defaults else ""),
            limit.queue,
            limit.job_type,
            f"{use.running} / {cap if cap is not None else '-'}",
            rate_text,
            "-" if weight is None else str(weight),
            held,
            limit.updated_by or "",
        )
    return table
