"""``tenantq enqueue``: publish jobs from the command line (scripts, smoke tests, backfills)."""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import Future

import typer
from rich.console import Console
from rich.progress import Progress

from tenantq.cli.access import check_access
from tenantq.errors import EnqueueFailed, InvalidJobError
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.settings import load_settings

console = Console()

#: Above this many jobs a progress bar replaces the list of job references.
PROGRESS_THRESHOLD = 20
CHUNK = 1_000


def register(app: typer.Typer) -> None:
    """Add ``tenantq enqueue`` to the command line."""
    app.command("enqueue")(enqueue_command)


def enqueue_command(
    job_type: str = typer.Argument(..., help="The job type, e.g. send_email."),
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant id."),
    payload: str = typer.Option("{}", "--payload", "-p", help="The payload as JSON."),
    queue: str | None = typer.Option(None, "--queue", "-q", help="Queue (default: 'default')."),
    run_after: str | None = typer.Option(
        None, "--run-after", help="ISO 8601 time with a zone, e.g. 2026-12-01T09:00:00+00:00."
    ),
    delay: float | None = typer.Option(None, "--delay", help="Run after this many seconds."),
    count: int = typer.Option(1, "--count", "-n", min=1, max=10_000_000, help="Copies to enqueue."),
    idempotency_key: str | None = typer.Option(
        None, "--idempotency-key", help="Deduplication key."
    ),
    max_attempts: int | None = typer.Option(None, "--max-attempts", help="1..1000."),
) -> None:
    """Enqueue COUNT jobs of JOB_TYPE for a tenant and print where Kafka acknowledged them."""
    try:
        payload_value = json.loads(payload)
    except ValueError as error:
        raise InvalidJobError(f"--payload is not valid JSON: {error}") from None
    run_after_time = _parse_time(run_after) if run_after is not None else None
    if idempotency_key is not None and count > 1:
        raise InvalidJobError("--idempotency-key names one job; it cannot be used with --count > 1")
    request = EnqueueRequest(
        job_type=job_type,
        tenant=tenant,
        payload=payload_value,
        queue=queue,
        run_after=run_after_time,
        delay=delay,
        max_attempts=max_attempts,
        idempotency_key=idempotency_key,
    )
    settings = load_settings()
    check_access(settings)  # refused credentials: one line, before a client retries for ever
    with Producer(settings) as producer:
        if count <= PROGRESS_THRESHOLD:
            for future in producer.enqueue_many([request] * count):
                console.print(_describe(future.result(timeout=60)), highlight=False)
            return
        _enqueue_with_progress(producer, request, count)


def _enqueue_with_progress(producer: Producer, request: EnqueueRequest, count: int) -> None:
    failures = 0
    first: JobRef | None = None
    last: JobRef | None = None
    last_future: Future[JobRef] | None = None
    with Progress(console=console, transient=False) as progress:
        task = progress.add_task("enqueued", total=count)

        def on_done(future: Future[JobRef]) -> None:
            nonlocal failures
            if future.exception() is not None:
                failures += 1
            progress.advance(task)

        for start in range(0, count, CHUNK):
            futures = producer.enqueue_many([request] * min(CHUNK, count - start))
            for future in futures:
                future.add_done_callback(on_done)
            if first is None and futures:
                first = _result_or_none(futures[0])
            last_future = futures[-1] if futures else None
        producer.flush(120)
        if last_future is not None:
            last = _result_or_none(last_future)
    if first is not None and last is not None:
        console.print(f"first {_describe(first)}", highlight=False)
        console.print(f"last  {_describe(last)}", highlight=False)
    if failures:
        raise EnqueueFailed(
            f"{failures} of {count} jobs were not acknowledged",
            retriable=True,
            possibly_persisted=True,
        )
    console.print(f"{count} jobs enqueued", highlight=False)


def _result_or_none(future: Future[JobRef]) -> JobRef | None:
    try:
        return future.result(timeout=120)
    except EnqueueFailed:
        return None


def _describe(ref: JobRef) -> str:
    return f"{ref.job_id} {ref.topic}[{ref.partition}]@{ref.offset}"


def _parse_time(text: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidJobError(f"--run-after {text!r} is not an ISO 8601 time") from None


__all__ = ["enqueue_command", "register"]
