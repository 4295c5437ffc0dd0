"""``tenantq dlq list | show | replay | purge``: inspect and repair a queue's dead letters.

Filters (all commands): ``--queue`` (default ``default``), ``--tenant``, ``--job-type``,
``--error-class`` (prefix), ``--since`` / ``--until`` (ISO 8601, UTC when no zone is given, or
an age such as ``15m``, ``1h``, ``2d``), ``--job-id``. Repeat an option for alternatives.

A record that does not parse is listed as UNREADABLE with why, shown in full by its place
(``tenantq dlq show 2@17``), and never replayed (``tenantq.dlq.records``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tenantq.cli.otel import trace_from_environment
from tenantq.dlq import output
from tenantq.dlq.actions import (
    current_actor,
    purge_dead_letters,
    replay_dead_letters,
    selected,
    validate_actor,
)
from tenantq.dlq.filter import DeadLetterFilter, FilterError, parse_position
from tenantq.dlq.header_values import printable
from tenantq.dlq.pacing import check_rate
from tenantq.dlq.reader import DeadLetterReader
from tenantq.dlq.replay import ReplayOptions
from tenantq.errors import ConfigurationError
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


Checked = TypeVar("Checked")


def _option_checked_by(
    check: Callable[[Checked], Checked],
) -> Callable[[Checked | None], Checked | None]:
    """An option callback: the value as ``check`` returns it, its ``ConfigurationError`` as
    the option's error, None (not given) as it is."""

    def callback(value: Checked | None) -> Checked | None:
        if value is None:
            return None
        try:
            return check(value)
        except ConfigurationError as error:
            raise typer.BadParameter(str(error)) from None

    return callback


#: ``--actor``: a name for audit rows (``validate_actor``), or None for the OS user.
_actor = _option_checked_by(validate_actor)
#: ``--rate``: publishes per second, finite and above 0 (``check_rate``).
_rate = _option_checked_by(check_rate)


ACTOR = typer.Option(
    None, "--actor", callback=_actor, help="Who does it, for the audit row (default: OS user)."
)


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
    """List dead letters, oldest first per partition (unreadable records too, with why)."""
    where = _filter(tenant, job_type, error_class, since, until, job_id)
    settings = load_settings()
    with selected(settings, queue, where, limit=limit or None) as letters:
        if as_json:
            output.stream_json(console, letters)
            return
        shown = list(letters)  # bounded by --limit
    console.print(output.letters_table(shown, f"DLQ of queue {queue}"))
    unreadable = sum(1 for letter in shown if letter.unreadable)
    console.print(
        f"{len(shown)} record(s)"
        + (f", {unreadable} unreadable (never replayed)" if unreadable else "")
        + (" (--limit reached)" if len(shown) == limit else "")
    )


@dlq_app.command("show")
def show_command(
    record: str = typer.Argument(
        ..., metavar="JOB_ID|PARTITION@OFFSET", help="A job id, or where a record sits (2@17)."
    ),
    queue: str = QUEUE,
    as_json: bool = typer.Option(False, "--json", help="JSON instead of tables."),
) -> None:
    """Show one job's dead letters in full, or the record at PARTITION@OFFSET (readable or
    not): headers escaped, envelope and payload, the job row."""
    position = parse_position(record)
    if position is not None:
        where = DeadLetterFilter(positions=frozenset({position}))
    else:
        try:
            where = DeadLetterFilter(job_ids=frozenset({uuid.UUID(record.strip())}))
        except ValueError:
            raise typer.BadParameter(
                f"'{printable(record, 40)}' is neither a job id (a UUID) nor PARTITION@OFFSET",
                param_hint="JOB_ID|PARTITION@OFFSET",
            ) from None
    settings = load_settings()
    with selected(settings, queue, where) as letters:
        if as_json:
            count = output.stream_json(console, letters, full=True)
        else:
            count = 0
            with connect(settings, autocommit=True, application_name="tenantq-dlq") as db:
                for letter in letters:
                    row = get_job(db, letter.job_id) if letter.job_id else None
                    output.show_letter(console, letter, row)
                    count += 1
    if count == 0:
        what = f"at {record}" if position is not None else f"of job {record}"
        typer.echo(f"tenantq: no dead letter {what} in queue {queue}", err=True)
        raise typer.Exit(1)


REPLAY_HELP = (
    "Run matching dead jobs again after a fix."
    "\n\n"
    "Each job whose row is dead (or that has no row) goes back to runnable with its attempts "
    "reset, then its original message is published and acknowledged. Jobs in any other state "
    "(succeeded, already replayed and running...) are skipped, so a second replay runs "
    "nothing twice. Undecodable and unreadable records are listed, skipped and counted. Every"
    " run, dry or not, writes an audit row. Exit code 1 when a publish failed (run the replay "
    "again) or the canary failed."
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
    rate: float | None = typer.Option(
        None, "--rate", callback=_rate, help="Publishes per second (above 0, finite)."
    ),
    canary: int = typer.Option(0, "--canary", min=0, help="Replay N first; go on if all succeed."),
    canary_timeout: float = typer.Option(
        300.0, "--canary-timeout", min=0.0, metavar="SECONDS", help="How long to wait for them."
    ),
    to: str = typer.Option("main", "--to", help="main (default), or retry: the first retry tier."),
    actor: str | None = ACTOR,
) -> None:
    """Run matching dead jobs again after a fix."""
    if to not in ("main", "retry"):
        raise typer.BadParameter("--to must be main or retry")
    where = _filter(tenant, job_type, error_class, since, until, job_id)
    settings = load_settings()
    # With OTEL_TRACES_EXPORTER, each replayed record's span links to its job's trace.
    trace_from_environment("tenantq-cli")
    options = ReplayOptions(
        dry_run=dry_run,
        rate=rate,
        canary=canary,
        canary_timeout=canary_timeout,
        to="retry" if to == "retry" else "main",
    )
    with _progress(True) as (on_open, on_scanned):
        report, audit_id = replay_dead_letters(
            settings,
            queue,
            where,
            actor=actor or current_actor(),
            options=options,
            limit=limit or None,
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
    actor: str | None = ACTOR,
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
    plan, audit_id = purge_dead_letters(
        settings, queue, where, actor=actor or current_actor(), dry_run=dry_run
    )
    output.purge_summary(console, plan, dry_run=dry_run)
    console.print(f"audit row {audit_id}{' (dry run)' if dry_run else ''}")
