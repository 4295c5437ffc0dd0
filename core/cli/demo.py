"""``tenantq demo``: run the whole system on this machine and prove it works."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console


def demo_command(
    jobs: int = typer.Option(3000, "--jobs", min=10, help="Jobs to enqueue."),
    tenants: int = typer.Option(40, "--tenants", min=3, help="Tenants (Zipf-skewed volume)."),
    processes: int = typer.Option(
        2, "--processes", min=2, help="Worker processes (a supervisor restarts crashed ones)."
    ),
    concurrency: int = typer.Option(32, "--concurrency", min=1, help="Slots per process."),
    report_dir: Path = typer.Option(
        None, "--report-dir", metavar="DIR", help="Report folder [default: reports/demo-<time>]."
    ),
    seed: int = typer.Option(7, "--seed", help="Seed of the workload and its failures."),
    timeout: float = typer.Option(
        300.0, "--timeout", min=1, help="Seconds to wait for every job to be terminal."
    ),
    delete_topics: bool = typer.Option(
        False, "--delete-topics", help="Delete the run's topics at the end."
    ),
) -> None:
    """Start the stack and a worker pool, run a multi-tenant workload with injected failures
    and one poison job, then check that every job ended where the plan says."""
    # Imported here: every `tenantq` command (worker processes too) loads this module.
    from tenantq.demo.record import DemoOptions
    from tenantq.demo.run import run_demo

    options = DemoOptions(
        jobs=jobs,
        tenants=tenants,
        processes=processes,
        concurrency=concurrency,
        seed=seed,
        timeout=timeout,
        report_dir=report_dir,
        delete_topics=delete_topics,
    )
    raise typer.Exit(run_demo(options, Console()))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
