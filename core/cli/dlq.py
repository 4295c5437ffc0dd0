"""``tenantq dlq list | show | replay | purge``: inspect and repair a queue's dead letters.

Filters (all commands): ``--queue`` (default ``default``), ``--tenant``, ``--job-type``,
``--error-class`` (prefix), ``--since`` / ``--until`` (ISO 8601, UTC when no zone is given, or
an age such as ``15m``, ``1h``, ``2d``), ``--job-id``. Repeat an option for alternatives.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tenantq.dlq import output
from tenantq.dlq.actions import (
    current_actor,
    purge_dead_letters,
    replay_dead_letters,
    selected,
)
from tenantq.dlq.filter import DeadLetterFilter, FilterError
from tenantq.dlq.reader import DeadLetterReader, DeadLetterReadError
from tenantq.settings import load_settings
from tenantq.store.engine import connect
from tenantq.store.job_admin import get_job

dlq_app = typer.Typer(
    help="Inspect, replay and purge dead letters (the DLQ topic of a queue).",
    no_args_is_help=True,
)
console = Console()

#: A progress bar appears when a command scans more records than this (at a terminal).
PROGRESS_THRESHOLD = 500


def register(app: typer.Typer) -> None:
    """Add ``tenantq dlq`` to the command line."""
    app.add_typer(dlq_app, name="dlq")


QUEUE = typer.Option("default", "--queue", "-q", help="The queue whose DLQ is read.")
TENANT = typer.Option(None, "--tenant", "-t", metavar="TENANT", help="Only this tenant.")
JOB_TYPE = typer.Option(None, "--job-type", metavar="TYPE", help="Only this job type.")
ERROR_CLASS = typer.Option(
    None, "--error-class", metavar="PREFIX", help="Error class prefix, e.g. Undecodable."
)
SINCE = typer.Option(None, "--since", metavar="TIME", help="Dead at or after (ISO or age: 1h).")
UNTIL = typer.Option(None, "--until", metavar="TIME", help="Dead before (ISO or age: 30m).")
JOB_ID = typer.Option(None, "--job-id", metavar="UUID", help="Only this job (repeatable).")


def _filter(
    tenant: list[str] | None,
    job_type: list[str] | None,
    error_class: list[str] | None,
    since: str | None,
    until: str | None,
    job_id: list[str] | None,
) -> DeadLetterFilter:
    try:
        return DeadLetterFilter.parse(
            tenants=tenant or (),
            job_types=job_type or (),
            error_classes=error_class or (),
            since=since,
            until=until,
            job_ids=job_id or (),
        )
    except FilterError as error:
        raise typer.BadParameter(str(error)) from None


@contextmanager
def _reporting_errors() -> Iterator[None]:
    try:
        yield
    except DeadLetterReadError as error:
        typer.echo(f"tenantq: {error}", err=True)
        raise typer.Exit(2) from None


@contextmanager
def _progress(enabled: bool) -> Iterator[tuple[Callable[[DeadLetterReader], None], Any]]:
    """(on_open, on_scanned) hooks that drive a progress bar over the records to scan."""
    progress = Progress(
        TextColumn("scanning DLQ"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task: list[Any] = []

    def on_open(reader: DeadLetterReader) -> None:
        if enabled and console.is_terminal and reader.total > PROGRESS_THRESHOLD:
            progress.start()
            task.append(progress.add_task("scan", total=reader.total))

    def on_scanned(count: int) -> None:
        if task:
            progress.update(task[0], completed=count)

    try:
        yield on_open, on_scanned
    finally:
        progress.stop()


@dlq_app.command("list")
def list_command(
    queue: str = QUEUE,
    tenant: list[str] | None = TENANT,
    job_type: list[str] | None = JOB_TYPE,
    error_class: list[str] | None = ERROR_CLASS,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    job_id: list[str] | None = JOB_ID,
    limit: int = typer.Option(100, "--limit", "-n", min=0, help="At most N records (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="A JSON array instead of a table."),
) -> None:
    """List dead letters, oldest first per partition."""
    where = _filter(tenant, job_type, error_class, since, until, job_id)
    settings = load_settings()
    with _reporting_errors(), selected(settings, queue, where, limit=limit or None) as letters:
        if as_json:
            output.stream_json(console, letters)
            return
        shown = list(letters)  # bounded by --limit
        console.print(output.letters_table(shown, f"DLQ of queue {queue}"))
        console.print(
            f"{len(shown)} record(s)" + (" (--limit reached)" if len(shown) == limit else "")
        )


@dlq_app.command("show")
def show_command(
    job_id: str = typer.Argument(..., help="The job id (UUID)."),
    queue: str = QUEUE,
    as_json: bool = typer.Option(False, "--json", help="JSON instead of tables."),
) -> None:
    """Show every dead letter of one job in full: headers, envelope and payload, job row."""
    where = _filter(None, None, None, None, None, [job_id])
    settings = load_settings()
    with _reporting_errors(), selected(settings, queue, where) as letters:
        if as_json:
            count = output.stream_json(console, letters, full=True)
        else:
            count = 0
            with connect(settings, autocommit=True, application_name="tenantq-dlq") as db:
                row = get_job(db, uuid.UUID(job_id))
                for letter in letters:
                    output.show_letter(console, letter, row)
                    count += 1
    if count == 0:
        typer.echo(f"tenantq: no dead letter of job {job_id} in queue {queue}", err=True)
        raise typer.Exit(1)


REPLAY_HELP = (
    "Run matching dead jobs again after a fix."
    "\n\n"
    "Each job whose row is dead (or that has no row) goes back to runnable with its attempts "
    "reset, then its original message is published and acknowledged. Jobs in any other state "
    "(succeeded, already replayed and running...) are skipped, so a second replay runs "
    "nothing twice. Undecodable records are listed and skipped. Every run, dry or not, writes"
    " an audit row. Exit code 1 when a publish failed (run the replay again) or the canary "
    "failed."
)


@dlq_app.command("replay", help=REPLAY_HELP)
def replay_command(
    queue: str = QUEUE,
    tenant: list[str] | None = TENANT,
    job_type: list[str] | None = JOB_TYPE,
    error_class: list[str] | None = ERROR_CLASS,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    job_id: list[str] | None = JOB_ID,
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would happen; change nothing."),
    limit: int = typer.Option(0, "--limit", "-n", min=0, help="At most N records (0: all)."),
    rate: float | None = typer.Option(None, "--rate", min=0.001, help="Publishes per second."),
    canary: int = typer.Option(0, "--canary", min=0, help="Replay N first; go on if all succeed."),
    canary_timeout: float = typer.Option(
        300.0, "--canary-timeout", min=0.0, metavar="SECONDS", help="How long to wait for them."
    ),
    to: str = typer.Option("main", "--to", help="main (default), or retry: the first retry tier."),
    actor: str | None = typer.Option(None, "--actor", help="Who replays (default: OS user)."),
) -> None:
    """Run matching dead jobs again after a fix."""
    if to not in ("main", "retry"):
        raise typer.BadParameter("--to must be main or retry")
    where = _filter(tenant, job_type, error_class, since, until, job_id)
    settings = load_settings()
    with _reporting_errors(), _progress(True) as (on_open, on_scanned):
        report, audit_id = replay_dead_letters(
            settings,
            queue,
            where,
            actor=actor or current_actor(),
            dry_run=dry_run,
            limit=limit or None,
            rate=rate,
            canary=canary,
            canary_timeout=canary_timeout,
            to="retry" if to == "retry" else "main",
            on_open=on_open,
            on_scanned=on_scanned,
        )
    output.replay_summary(console, report, audit_id)
    if not report.ok:
        raise typer.Exit(1)


PURGE_HELP = (
    "Delete the dead letters written before --until, for good."
    "\n\n"
    "Kafka cannot delete single records, only every record of a partition below an offset, so"
    " purge takes one filter: --until (per partition, everything before the first record at "
    "or after that time is deleted); any other filter is refused. Job rows are not touched: "
    "dead jobs stay dead, with their payload in Postgres, but can no longer be replayed from "
    "the DLQ. Writes an audit row (action purge), also for --dry-run."
)


@dlq_app.command("purge", help=PURGE_HELP)
def purge_command(
    until: str = typer.Option(..., "--until", metavar="TIME", help="Delete records before this."),
    queue: str = QUEUE,
    tenant: list[str] | None = TENANT,
    job_type: list[str] | None = JOB_TYPE,
    error_class: list[str] | None = ERROR_CLASS,
    since: str | None = SINCE,
    job_id: list[str] | None = JOB_ID,
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted only."),
    yes: bool = typer.Option(False, "--yes", help="Confirm the deletion (required)."),
    actor: str | None = typer.Option(None, "--actor", help="Who purges (default: OS user)."),
) -> None:
    """Delete the dead letters written before --until, for good."""
    if not (dry_run or yes):
        raise typer.BadParameter("purge deletes records for good: add --yes (or --dry-run)")
    where = _filter(tenant, job_type, error_class, since, until, job_id)
    if not where.only_until:
        raise typer.BadParameter(
            "Kafka deletes only every record of a partition below an offset, so purge takes "
            "--until and no other filter"
        )
    settings = load_settings()
    with _reporting_errors():
        plan, audit_id = purge_dead_letters(
            settings, queue, where, actor=actor or current_actor(), dry_run=dry_run
        )
    output.purge_summary(console, plan, dry_run=dry_run)
    console.print(f"audit row {audit_id}{' (dry run)' if dry_run else ''}")
