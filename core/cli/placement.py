"""``tenantq placement``: show and change where hot tenants' jobs go (no deploy needed).

Producers pick a change up within ``placement_ttl_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import typer
from rich.console import Console
from rich.table import Table

from tenantq.errors import ConfigurationError
from tenantq.operator_name import operator_name
from tenantq.partitioner.placement import Placement
from tenantq.settings import Settings, load_settings
from tenantq.store.engine import DeploymentConnection, connect
from tenantq.store.placement import placement_delete, placement_list, placement_upsert
from tenantq.tenant_ids import validate_tenant_id

console = Console()
placement_app = typer.Typer(
    help="Tenant placement: hashed (default), spread over K keys, pinned to partitions, or "
    "the hot lane (where workers move a tenant that floods its partition).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add ``tenantq placement`` to the command line."""
    app.add_typer(placement_app, name="placement")


@contextmanager
def _database(settings: Settings) -> Iterator[DeploymentConnection]:
    """A connection for one command; database errors become one-line tenantq errors."""
    try:
        with connect(settings, autocommit=True, application_name="tenantq-cli") as connection:
            yield connection
    except psycopg.Error as error:
        first_line = (str(error).splitlines() or [type(error).__name__])[0]
        raise ConfigurationError(
            f"placement table not usable: {first_line} (is the database migrated? "
            "`tenantq db upgrade`)"
        ) from None


def _declared_queue(settings: Settings, queue: str) -> int:
    return settings.queue(queue).partitions


@placement_app.command("show")
def placement_show(
    queue: str | None = typer.Option(None, "--queue", "-q", help="Only this queue."),
) -> None:
    """List every tenant whose placement is not the default."""
    settings = load_settings()
    with _database(settings) as connection:
        records = placement_list(connection, queue)
    if not records:
        console.print("every tenant is hashed (no placements)")
        return
    table = Table("queue", "tenant", "placement", "updated", "by", "why")
    for record in records:
        placement = Placement(
            record.mode,  # type: ignore[arg-type]
            shards=record.shards,
            partitions=record.partitions,
        )
        updated = record.updated_at.isoformat(timespec="seconds") if record.updated_at else ""
        by = (record.updated_by or "") + (" (worker)" if record.automatic else "")
        table.add_row(
            record.queue,
            record.tenant_id,
            placement.describe(),
            updated,
            by,
            record.reason or "",
        )
    console.print(table)


@placement_app.command("set")
def placement_set(
    tenant: str = typer.Argument(..., help="The tenant id."),
    queue: str = typer.Option("default", "--queue", "-q", help="The queue."),
    spread: int | None = typer.Option(None, "--spread", help="Spread over K keys (K >= 2)."),
    pinned: str | None = typer.Option(None, "--pinned", help="Pin to partitions, e.g. 1,2,3."),
    hashed: bool = typer.Option(
        False, "--hashed", help="Explicitly hashed (the default); workers never move it."
    ),
    lane: bool = typer.Option(False, "--lane", help="In the queue's hot lane, until cleared."),
) -> None:
    """Set the placement of TENANT in a queue: exactly one of --spread, --pinned, --hashed,
    --lane. An operator's placement stands: no worker moves the tenant to or from the lane."""
    validate_tenant_id(tenant)
    chosen = [
        name
        for name, given in (
            ("--spread", spread is not None),
            ("--pinned", pinned),
            ("--hashed", hashed),
            ("--lane", lane),
        )
        if given
    ]
    if len(chosen) != 1:
        raise ConfigurationError(
            "give exactly one of --spread K, --pinned P1,P2, --hashed or --lane"
            + (f" (got {' and '.join(chosen)})" if chosen else "")
        )
    settings = load_settings()
    partitions = _declared_queue(settings, queue)
    if spread is not None:
        placement = Placement.spread(spread)
    elif pinned:
        placement = Placement.pinned(_parse_partitions(pinned))
        placement.check_partition_count(partitions)
    elif lane:
        placement = Placement.lane()
    else:
        placement = Placement()
    with _database(settings) as connection:
        placement_upsert(
            connection,
            queue=queue,
            tenant_id=tenant,
            placement=placement,
            updated_by=operator_name(),
            reason="set by an operator",
        )
    console.print(
        f"{tenant} in {queue}: {placement.describe()} (producers apply it within "
        f"{settings.producer.placement_ttl_seconds:g}s)",
        highlight=False,
    )


@placement_app.command("clear")
def placement_clear(
    tenant: str = typer.Argument(..., help="The tenant id."),
    queue: str = typer.Option("default", "--queue", "-q", help="The queue."),
) -> None:
    """Return TENANT to the default (hashed) placement; a tenant in the hot lane leaves it
    (workers may move it again if it floods again)."""
    validate_tenant_id(tenant)
    settings = load_settings()
    _declared_queue(settings, queue)
    with _database(settings) as connection:
        deleted = placement_delete(connection, queue=queue, tenant_id=tenant)
    console.print(
        f"{tenant} in {queue}: " + ("back to hashed" if deleted else "already hashed"),
        highlight=False,
    )


def _parse_partitions(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigurationError(
            f"--pinned {text!r} must be partition numbers separated by commas"
        ) from None
