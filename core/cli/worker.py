"""``tenantq worker MODULE:APP``: run handlers as members of the queues' consumer groups, and
``tenantq jobs show | cancel``."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Any

import typer
from rich.console import Console

from tenantq.app import load_app
from tenantq.cli.otel import trace_from_environment
from tenantq.errors import ConfigurationError
from tenantq.observability import tracing
from tenantq.settings import MAX_CONCURRENCY, MAX_PROCESSES, load_settings

console = Console()
jobs_app = typer.Typer(help="Inspect and cancel single jobs.")


def worker_command(
    app_reference: str = typer.Argument(..., metavar="MODULE:APP"),
    queues: str = typer.Option(None, "--queues", "-q", help="Comma-separated queues to serve."),
    concurrency: int = typer.Option(
        None, "--concurrency", "-c", min=1, max=MAX_CONCURRENCY, help="Handler slots."
    ),
    processes: int = typer.Option(
        None,
        "--processes",
        "-p",
        min=1,
        max=MAX_PROCESSES,
        help="Member processes (each a group member); default TENANTQ_WORKER__PROCESSES, "
        "else one per CPU, at most 4.",
    ),
    strict_priority: bool = typer.Option(
        False, "--strict-priority", help="Serve queues strictly in the order given."
    ),
    member: bool = typer.Option(False, "--member", hidden=True),
    worker_id: str = typer.Option(None, "--worker-id", hidden=True),
) -> None:
    """Run a worker: supervised member processes (one per CPU, at most 4, unless
    --processes), each one group member running handlers in its own handler process, and the
    app's background services."""
    settings = load_settings()
    from tenantq.log import configure_logging

    # One JSON event per line (job id, tenant, attempt as fields), secrets masked.
    configure_logging(settings.log_level)
    app = load_app(app_reference)
    # After the app's import: an app that sets up its own tracer provider keeps it.
    trace_from_environment(tracing.WORKER_SERVICE_NAME)
    queue_list = [q.strip() for q in queues.split(",")] if queues else None
    for name in queue_list or []:
        settings.queue(name)
    if member:
        from tenantq.consumer.worker import Worker

        worker = Worker(
            app,
            queue_list,
            settings=settings,
            concurrency=concurrency,
            strict_priority=strict_priority,
            worker_id=worker_id,
            app_reference=app_reference,
        )
        _stop_with_supervisor(worker)
        # The modules, the app and the worker built so far live as long as the process.
        from tenantq.consumer.collector import settle_collector

        settle_collector()
        try:
            worker.run()
        finally:
            tracing.shutdown()
        raise typer.Exit(worker.exit_code)
    from tenantq.cli.access import check_access
    from tenantq.consumer.supervisor import Supervisor
    from tenantq.services.worker_services import background_services

    arguments = [app_reference]
    if queues:
        arguments += ["--queues", queues]
    if concurrency:
        arguments += ["--concurrency", str(concurrency)]
    if strict_priority:
        arguments.append("--strict-priority")
    check_access(settings)
    served = queue_list or app.queues() or ["default"]
    services = background_services(app, settings, served)
    try:
        members = processes or settings.worker.member_processes()
        code = Supervisor(arguments, members, settings, queue_list, services).run()
    finally:
        tracing.shutdown()
    raise typer.Exit(code)


def _stop_with_supervisor(worker: Any) -> None:
    """A member whose supervisor is gone (killed -9) drains and leaves, instead of running on
    unsupervised: nothing would restart it, and nobody would stop it."""
    supervisor = os.getppid()

    def follow() -> None:
        while os.getppid() == supervisor:
            time.sleep(0.5)
        logging.getLogger("tenantq.worker").warning("supervisor gone; this member stops")
        worker.stop()

    threading.Thread(target=follow, name="tenantq-follow-supervisor", daemon=True).start()


def _job_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ConfigurationError(f"{value!r} is not a job id (a UUID)") from None


@jobs_app.command("show")
def jobs_show(
    job_id: str,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show a job's state, attempts, lease, last error and progress."""
    from tenantq.store.engine import connect
    from tenantq.store.job_admin import get_job, list_attempts

    with connect(load_settings(), autocommit=True) as connection:
        job = get_job(connection, _job_id(job_id))
        if job is None:
            typer.echo(f"tenantq: no such job {job_id}", err=True)
            raise typer.Exit(1)
        attempts = list_attempts(connection, job["id"])
    job.pop("payload", None)
    if as_json:
        typer.echo(json.dumps({"job": job, "attempts": attempts}, default=str, indent=2))
        return
    for key, value in job.items():
        if value is not None:
            console.print(f"[bold]{key:>20}[/] {value}")
    for attempt in attempts:
        console.print(
            f"  attempt {attempt['attempt']}: {attempt['outcome']} by {attempt['worker_id']}"
            f" {attempt['error_class'] or ''} {attempt['error_message'] or ''}"
        )


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: str,
    unseen: bool = typer.Option(
        False,
        "--unseen",
        help="The job is in Kafka but no worker has seen it yet (it has no row): record it "
        "canceled in --queue so that it never runs.",
    ),
    queue: str = typer.Option("default", "--queue", help="Queue of the --unseen job."),
) -> None:
    """Cancel a job: it never runs if it has not started; a running job is asked to stop. An
    unknown job id is an error (exit 1) and changes nothing, unless --unseen."""
    from tenantq.store.engine import connect
    from tenantq.store.job_admin import cancel_job, get_job

    identifier = _job_id(job_id)
    settings = load_settings()
    if unseen:
        settings.queue(queue)  # a clear error for an undeclared queue
    with connect(settings, autocommit=True) as connection:
        state = cancel_job(connection, identifier, queue, create_unseen=unseen)
        known = state is not None or get_job(connection, identifier) is not None
    if not known:
        typer.echo(
            f"tenantq: no such job {identifier} (one in Kafka that no worker has seen yet: "
            "add --unseen)",
            err=True,
        )
        raise typer.Exit(1)
    if state is None:
        typer.echo(f"tenantq: job {identifier} had already ended; nothing to cancel", err=True)
        raise typer.Exit(1)
    if state == "canceled":
        console.print(f"job {job_id} canceled")
    else:
        console.print(f"job {job_id} is running: cancellation requested")


def register(app: typer.Typer) -> None:
    app.command("worker")(worker_command)
    app.add_typer(jobs_app, name="jobs")
