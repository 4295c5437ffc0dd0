"""The verdict of a ``tenantq demo`` run: what happened, checked against the plan, printed at
the terminal and written as ``report.md`` (with plots from ``tenantq.demo.plots``)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tenantq.demo.kafka import DeadLetterReport
from tenantq.demo.monitor import longest_stall
from tenantq.demo.plots import write_plots
from tenantq.demo.record import DemoRun

TERMINAL = ("succeeded", "dead", "canceled")


@dataclass
class DemoSummary:
    """The numbers and the checks; ``ok`` when every check passed."""

    total: int
    by_state: Counter[str]
    planned: Counter[str]
    expected_dead: set[uuid.UUID]
    dead: set[uuid.UUID]
    latency: dict[str, tuple[int, float, float]]  # class -> (jobs, p50, p99)
    elapsed: float
    retries: int
    crashes: int
    dead_letters: DeadLetterReport
    #: (seconds, partition) of the longest time a partition with lag made no progress.
    stall: tuple[float, int | None] = (0.0, None)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank on sorted values); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def summarize(run: DemoRun) -> DemoSummary:
    """Compare the run with its plan: every job terminal, dead = DLQ = permanent + poison."""
    id_of = {job.seq: run.job_ids[job.seq] for job in run.workload.jobs}
    expected_dead = {id_of[job.seq] for job in run.workload.expected_dead}
    by_state = Counter(outcome.state for outcome in run.outcomes)
    dead = {outcome.job_id for outcome in run.outcomes if outcome.state == "dead"}
    finished = [o.finished_at for o in run.outcomes if o.finished_at is not None]
    elapsed = (max(finished) - run.started_wall) if finished else 0.0
    latency = {
        name: (len(values), percentile(values, 0.5), percentile(values, 0.99))
        for name, values in run.latencies().items()
    }
    summary = DemoSummary(
        total=len(run.job_ids),
        by_state=by_state,
        planned=run.workload.counts(),
        expected_dead=expected_dead,
        dead=dead,
        latency=latency,
        elapsed=elapsed,
        retries=sum(max(0, o.attempts - 1) for o in run.outcomes),
        crashes=run.crashes,
        dead_letters=run.dead_letters,
        stall=longest_stall(run.samples),
    )
    problems = summary.problems
    unfinished = summary.total - sum(by_state.get(state, 0) for state in TERMINAL)
    if run.timed_out:
        problems.append(f"timed out after {run.options.timeout:.0f}s")
    if unfinished:
        problems.append(f"{unfinished} jobs are not terminal: {_unfinished_jobs(run)}")
    if dead != expected_dead:
        problems.append(
            f"dead jobs differ from the plan: {len(dead - expected_dead)} unexpected, "
            f"{len(expected_dead - dead)} missing"
        )
    letters = run.dead_letters.distinct_job_ids
    if letters != expected_dead:
        problems.append(
            f"the DLQ differs from the plan: {len(letters - expected_dead)} unexpected, "
            f"{len(expected_dead - letters)} missing"
        )
    if run.dead_letters.total != len(letters):
        problems.append(f"the DLQ holds {run.dead_letters.total - len(letters)} duplicate letters")
    return summary


def _unfinished_jobs(run: DemoRun, shown: int = 5) -> str:
    """The first few jobs that are not terminal: id, tenant, type and state (``no row``: the
    database never saw the job), so that a failed run can be followed up in the logs."""
    state_of = {outcome.job_id: outcome.state for outcome in run.outcomes}
    listed: list[str] = []
    for job in run.workload.jobs:
        job_id = run.job_ids[job.seq]
        state = state_of.get(job_id)
        if state not in TERMINAL:
            listed.append(f"{job_id} ({job.tenant}, {job.job_type}, {state or 'no row'})")
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return ", ".join(listed[:shown]) + more


def _summary_lines(summary: DemoSummary) -> list[str]:
    planned = summary.planned
    states = ", ".join(f"{state} {summary.by_state.get(state, 0):,}" for state in TERMINAL)
    rate = summary.total / summary.elapsed if summary.elapsed > 0 else 0.0
    return [
        f"{summary.total:,} jobs in {summary.elapsed:.1f}s ({rate:,.0f} jobs/s end to end): "
        f"{states}",
        f"planned failures: {planned['timeouts']} jobs with timeouts, {planned['throttles']} "
        f"with 429s (retried), {planned['permanent']} permanent, "
        f"{planned['poison']} poison (max_attempts 3)",
        f"retries taken: {summary.retries:,}; processes crashed and restarted: {summary.crashes}",
        "longest stall of a partition with lag: "
        + (
            f"{summary.stall[0]:.1f}s (partition {summary.stall[1]})"
            if summary.stall[1] is not None
            else "none"
        ),
        f"DLQ: {summary.dead_letters.total} letters = {planned['permanent']} permanent + "
        f"{planned['poison']} poison expected -> "
        + (
            "exactly the planned jobs"
            if summary.dead_letters.distinct_job_ids == summary.expected_dead
            else "MISMATCH"
        ),
    ]


def _latency_table(summary: DemoSummary) -> list[tuple[str, str, str, str]]:
    return [
        (name, f"{count:,}", f"{p50 * 1000:,.0f} ms", f"{p99 * 1000:,.0f} ms")
        for name, (count, p50, p99) in summary.latency.items()
    ]


def _dead_letter_rows(letters: DeadLetterReport) -> list[tuple[str, str, str]]:
    rows = []
    for error_class, count in letters.by_error_class.most_common():
        messages = letters.messages_by_error_class[error_class]
        why = "; ".join(f"{text} (x{n})" for text, n in messages.most_common(3))
        rows.append((error_class, str(count), why))
    return rows


def print_summary(summary: DemoSummary, console: Console) -> None:
    """The summary at the terminal."""
    console.rule("[bold]summary")
    for line in _summary_lines(summary):
        console.print(line)
    latency = Table(title="latency, enqueue -> finished", title_justify="left")
    for column in ("tenants", "jobs", "p50", "p99"):
        latency.add_column(column, justify="left" if column == "tenants" else "right")
    for row in _latency_table(summary):
        latency.add_row(*row)
    console.print(latency)
    dlq = Table(title="dead-letter topic, by error class", title_justify="left")
    for column in ("error class", "letters", "why"):
        dlq.add_column(column)
    for dead_row in _dead_letter_rows(summary.dead_letters):
        dlq.add_row(*dead_row)
    console.print(dlq)
    if summary.ok:
        console.print("[bold green]OK[/]: every job is terminal; dead = DLQ = permanent + poison")
    for problem in summary.problems:
        console.print(f"[bold red]FAILED[/]: {problem}")


def write_report(run: DemoRun, summary: DemoSummary, folder: Path) -> Path:
    """``report.md``, ``summary.json`` and, when matplotlib is installed, plots in ``folder``;
    returns the folder."""
    plots, plot_note = write_plots(run, folder)
    options = run.options
    lines = [
        "# tenantq demo report",
        "",
        f"Topic prefix `{run.prefix}`; {options.jobs} jobs, {options.tenants} tenants, "
        f"{options.processes} worker processes x {options.concurrency} slots, seed {options.seed}.",
        "",
        "**Verdict: " + ("OK" if summary.ok else "FAILED: " + "; ".join(summary.problems)) + "**",
        "",
        *(f"- {line}" for line in _summary_lines(summary)),
        "",
        "## Latency (enqueue to finished)",
        "",
        "| tenants | jobs | p50 | p99 |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {' | '.join(row)} |" for row in _latency_table(summary)),
        "",
        "## Dead-letter topic",
        "",
        "| error class | letters | why |",
        "| --- | ---: | --- |",
        *(f"| {' | '.join(row)} |" for row in _dead_letter_rows(summary.dead_letters)),
        "",
        "## Plots",
        "",
        *(f"![{name}]({name})" for name in plots),
        plot_note,
        "",
        "Worker output: `workers.log`.",
        "",
    ]
    (folder / "report.md").write_text("\n".join(lines))
    (folder / "summary.json").write_text(json.dumps(_facts(run, summary), indent=1))
    return folder


def _facts(run: DemoRun, summary: DemoSummary) -> dict[str, object]:
    """The run as data, for scripts and tests that check a demo independently."""
    return {
        "ok": summary.ok,
        "problems": summary.problems,
        "topic_prefix": run.prefix,
        "total": summary.total,
        "by_state": dict(summary.by_state),
        "planned": dict(summary.planned),
        "job_ids": [str(job_id) for job_id in run.job_ids],
        "expected_dead": sorted(str(job_id) for job_id in summary.expected_dead),
        "dead": sorted(str(job_id) for job_id in summary.dead),
        "dead_letters": sorted(str(job_id) for job_id in summary.dead_letters.job_ids),
        "latency_seconds": {
            name: {"jobs": jobs, "p50": p50, "p99": p99}
            for name, (jobs, p50, p99) in summary.latency.items()
        },
        "crashes": summary.crashes,
        "longest_stall_seconds": summary.stall[0],
        "retries": summary.retries,
        "elapsed_seconds": summary.elapsed,
    }
