"""``tenantq prune``: delete finished jobs (and their attempt rows) older than a duration."""

from __future__ import annotations

import datetime as dt

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from tenantq.errors import ConfigurationError
from tenantq.settings import duration_text, load_settings, parse_duration
from tenantq.store.engine import connect
from tenantq.store.retention import PRUNED_STATES, Pruned, job_prune_preview

console = Console()

#: Above this many jobs a progress bar shows the batches going.
PROGRESS_THRESHOLD = 5_000


def register(app: typer.Typer) -> None:
    """Add ``tenantq prune`` to the command line."""
    app.command("prune")(prune_command)


def prune_command(
    older_than: str = typer.Option(
        ...,
        "--older-than",
        metavar="DURATION",
        help="Finished longer ago than this: 0s, 90m, 12h, 7d, 2w.",
    ),
    state: list[str] | None = typer.Option(
        None,
        "--state",
        metavar="STATE",
        help="succeeded, dead or canceled (repeatable); default: all three.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would go; delete nothing."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, max=100_000, help="Jobs per transaction (default: settings)."
    ),
) -> None:
    """Delete finished jobs (succeeded, dead, canceled) with their attempt rows, oldest first,
    in bounded batches. Jobs that are pending, runnable, leased or retrying are never
    touched. Prints what it removed."""
    from tenantq.retention.pruner import prune_jobs

    try:
        age = parse_duration(older_than)
    except ValueError as error:
        raise ConfigurationError(f"--older-than: {error}") from None
    states = state or list(PRUNED_STATES)
    unknown = sorted(set(states) - set(PRUNED_STATES))
    if unknown:
        raise ConfigurationError(
            f"--state {', '.join(unknown)}: only finished jobs are pruned (succeeded, dead, "
            "canceled)"
        )
    ages: dict[str, dt.timedelta | None] = {
        name: age if name in states else None for name in PRUNED_STATES
    }
    settings = load_settings()
    size = batch_size or settings.retention.batch_size
    with connect(settings, autocommit=True, application_name="tenantq-prune") as connection:
        preview = job_prune_preview(connection, ages)
        if dry_run:
            _report(preview, age, dry_run=True)
            return
        if preview.total <= PROGRESS_THRESHOLD:
            pruned = prune_jobs(connection, ages, batch_size=size)
        else:
            columns = (TextColumn("pruning"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, console=console) as progress:
                task = progress.add_task("pruning", total=preview.total)
                pruned = prune_jobs(
                    connection,
                    ages,
                    batch_size=size,
                    on_batch=lambda batch: progress.advance(task, batch.total),
                )
    _report(pruned, age, dry_run=False)


def _report(pruned: Pruned, age: dt.timedelta, *, dry_run: bool) -> None:
    verb = "would remove" if dry_run else "removed"
    by_state = ", ".join(f"{pruned.jobs.get(name, 0)} {name}" for name in PRUNED_STATES)
    console.print(
        f"{verb} {pruned.total} jobs finished more than {duration_text(age)} ago ({by_state}) "
        f"and {pruned.attempts} attempt rows",
        highlight=False,
        soft_wrap=True,
    )
