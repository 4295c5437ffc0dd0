"""The throughput benchmark's figures: per configuration over the runs (median and min of
jobs/s, median CPU per job, latency at half load), the compact table printed at the end,
and the report folder (``report.md``, ``summary.json``, plots when matplotlib is there)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench_run import KAFKA, POSTGRES, WORKER, Measured, median

from tenantq.demo.plots import NO_PLOTS, PlotFolder

CPU_COLUMNS = (WORKER, KAFKA, POSTGRES, "total", "postgres (all)")


@dataclass
class ConfigSummary:
    """One configuration over its runs."""

    system: str
    label: str
    runs: list[Measured]

    @property
    def rates(self) -> list[float]:
        return [run.rate for run in self.runs]

    @property
    def median_rate(self) -> float:
        return median(self.rates)

    @property
    def end_to_end_rates(self) -> list[float]:
        return [run.end_to_end.rate for run in self.runs if run.end_to_end is not None]

    def cpu(self, column: str, *, end_to_end: bool = False) -> float | None:
        figures = [run.end_to_end_micros() if end_to_end else run.micros_per_job()
                   for run in self.runs]  # fmt: skip
        values = [micros[column] for micros in figures if column in micros]
        return median(values) if values else None

    def latency(self, which: str) -> tuple[float, float] | None:
        """(median, worst) over the runs of p50 or p99, in seconds."""
        values = [getattr(run.latency, which) for run in self.runs if run.latency is not None]
        return (median(values), max(values)) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "label": self.label,
            "runs": len(self.runs),
            "jobs_per_second": {
                "median": round(self.median_rate, 1),
                "min": round(min(self.rates), 1),
                "all": [round(rate, 1) for rate in self.rates],
            },
            "cpu_us_per_job_median": {
                column: None if self.cpu(column) is None else round(self.cpu(column) or 0.0, 1)
                for column in CPU_COLUMNS
            },
            "latency_ms": {
                which: None
                if (pair := self.latency(which)) is None
                else {"median": round(pair[0] * 1000, 1), "worst": round(pair[1] * 1000, 1)}
                for which in ("p50", "p99")
            },
            "end_to_end_jobs_per_second": {
                "median": round(median(self.end_to_end_rates), 1),
                "min": round(min(self.end_to_end_rates), 1),
                "all": [round(rate, 1) for rate in self.end_to_end_rates],
            }
            if self.end_to_end_rates
            else None,
        }


def summarize(results: Sequence[Measured]) -> list[ConfigSummary]:
    summaries: dict[str, ConfigSummary] = {}
    for run in results:
        summaries.setdefault(run.label, ConfigSummary(run.system, run.label, [])).runs.append(run)
    return list(summaries.values())


def best(summaries: Sequence[ConfigSummary], system: str) -> ConfigSummary | None:
    """The configuration of ``system`` with the highest median rate."""
    candidates = [summary for summary in summaries if summary.system == system]
    return max(candidates, key=lambda summary: summary.median_rate, default=None)


def end_to_end_rate(run: Measured) -> float | None:
    """The rate of ``run``'s end-to-end phase (None: it had none)."""
    return None if run.end_to_end is None else run.end_to_end.rate


def round_ratios(
    results: Sequence[Measured], rate: Callable[[Measured], float | None] = lambda run: run.rate
) -> list[float]:
    """Per round (runs are tagged in order, one of each configuration per round): the best
    tenantq rate over the best PgQueuer rate of the same round, so drift between rounds
    (a busy machine) cancels out; ``rate`` picks the figure (``end_to_end_rate``: the
    end-to-end phase's, runs without one left out)."""
    ratios = []
    rounds: dict[int, list[Measured]] = {}
    for run in results:
        rounds.setdefault(run.round_number, []).append(run)
    for runs in rounds.values():
        tenantq = [r for run in runs if run.system == "tenantq" and (r := rate(run)) is not None]
        pgqueuer = [r for run in runs if run.system == "pgqueuer" and (r := rate(run)) is not None]
        if tenantq and pgqueuer:
            ratios.append(max(tenantq) / max(pgqueuer))
    return ratios


def _figure(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def table(summaries: Sequence[ConfigSummary]) -> list[str]:
    """The compact table (markdown, readable as printed)."""
    reference = best(summaries, "pgqueuer")
    lines = [
        "| configuration | jobs/s median (min) | ÷ PgQueuer best | CPU µs/job: worker | Kafka "
        "| Postgres | total | Postgres (all) | enqueue→start at half load p50 / p99 (worst) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for summary in summaries:
        ratio = (
            _figure(summary.median_rate / reference.median_rate, 2)
            if reference is not None and summary.system == "tenantq"
            else ""
        )
        p50, p99 = summary.latency("p50"), summary.latency("p99")
        latency = (
            "—"
            if p50 is None or p99 is None
            else f"{p50[0] * 1000:,.0f} / {p99[0] * 1000:,.0f} ({p99[1] * 1000:,.0f}) ms"
        )
        lines.append(
            f"| {summary.label} | {summary.median_rate:,.0f} ({min(summary.rates):,.0f}) "
            f"| {ratio} | "
            + " | ".join(_figure(summary.cpu(column)) for column in CPU_COLUMNS)
            + f" | {latency} |"
        )
    return lines


def end_to_end_ratios(results: Sequence[Measured]) -> dict[str, list[float]]:
    """Per configuration, its end-to-end rate over PgQueuer's best end-to-end rate of the
    same round, one ratio per round that has both."""
    reference: dict[int, float] = {}
    for run in results:
        if run.system == "pgqueuer" and (rate := end_to_end_rate(run)) is not None:
            reference[run.round_number] = max(reference.get(run.round_number, 0.0), rate)
    ratios: dict[str, list[float]] = {}
    for run in results:
        rate, best_of_round = end_to_end_rate(run), reference.get(run.round_number)
        if rate is not None and best_of_round:
            ratios.setdefault(run.label, []).append(rate / best_of_round)
    return ratios


def end_to_end_table(summaries: Sequence[ConfigSummary], results: Sequence[Measured]) -> list[str]:
    """The end-to-end phase's table and a blank line (none: no lines): jobs/s and the ratio
    to PgQueuer's best of the same round, each median (min) over the rounds, and the phase's
    CPU per job."""
    rows = [summary for summary in summaries if summary.end_to_end_rates]
    if not rows:
        return []
    ratios = end_to_end_ratios(results)
    lines = [
        "| configuration, end to end | jobs/s median (min) | ÷ PgQueuer best, same round, "
        "median (min) | CPU µs/job: worker | Kafka | Postgres | total | Postgres (all) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for summary in rows:
        rates, ratio = summary.end_to_end_rates, ratios.get(summary.label)
        lines.append(
            f"| {summary.label} | {median(rates):,.0f} ({min(rates):,.0f}) | "
            + ("—" if not ratio else f"{median(ratio):.2f} ({min(ratio):.2f})")
            + " | "
            + " | ".join(_figure(summary.cpu(c, end_to_end=True)) for c in CPU_COLUMNS)
            + " |"
        )
    return [*lines, ""]


def role_table(summaries: Sequence[ConfigSummary]) -> list[str]:
    """CPU µs/job of every process role, from each configuration's median-rate run."""
    lines = ["| configuration | group / role | µs/job |", "| --- | --- | ---: |"]
    for summary in summaries:
        run = sorted(summary.runs, key=lambda r: r.rate)[len(summary.runs) // 2]
        if run.cpu is None or not run.cpu_jobs:
            continue
        for (group, role), seconds in sorted(
            run.cpu.by_role.items(), key=lambda item: (item[0][0], -item[1])
        ):
            micros = seconds * 1e6 / run.cpu_jobs
            if abs(micros) >= 0.5:
                lines.append(f"| {summary.label} | {group} / {role} | {micros:,.1f} |")
    return lines


def _half_load(run: Measured) -> str:
    cpu = run.micros_per_job(half_load=True)
    if run.latency is None:
        return "not measured"
    return (
        f"{run.latency.rate:,.0f} jobs/s, p50 {run.latency.p50 * 1000:,.0f} ms, p99 "
        f"{run.latency.p99 * 1000:,.0f} ms, max {run.latency.max * 1000:,.0f} ms, CPU "
        f"{cpu.get('total', 0.0):,.0f} µs/job"
    )


def _end_to_end(run: Measured) -> str:
    phase = run.end_to_end
    if phase is None:
        return ""
    cpu = run.end_to_end_micros().get("total", 0.0)
    return (
        f"end to end {phase.jobs:,} jobs in {phase.seconds:.2f} s, {phase.rate:,.0f} jobs/s, "
        f"CPU {cpu:,.0f} µs/job; "
    )


def background_text(run: Measured) -> str:
    """The servers' background CPU before the run started, per process group."""
    return ", ".join(f"{group} {rate * 1000:,.0f} ms/s" for group, rate in run.background.items())


def write_report(
    folder: Path,
    results: Sequence[Measured],
    header: list[str],
    footer: list[str],
    meta: dict[str, Any],
) -> list[str]:
    """report.md, summary.json and the plots; returns the names of the files written."""
    summaries = summarize(results)
    plots, plot_note = _plots(folder, summaries)
    lines = ["# Throughput: tenantq against PgQueuer", "", *header, "", *table(summaries), ""]
    lines += end_to_end_table(summaries, results)
    lines += [*footer, ""]
    lines += [f"![{name}]({name})" for name in plots] + ([plot_note] if plot_note else [])
    lines += ["", "## Where the CPU goes (µs per job, median run)", "", *role_table(summaries)]
    lines += ["", "## Every run", ""]
    lines += [
        f"- round {run.round_number}, {run.label}: {run.rate:,.0f} jobs/s over "
        f"{run.seconds:.2f} s, start-up {run.startup_seconds:.1f} s, CPU window "
        f"{run.cpu_jobs:,} jobs; at half load {_half_load(run)}; servers' background before "
        f"start: {background_text(run)}; {_end_to_end(run)}`{run.command}`"
        + "".join(f"; {note}" for note in run.notes)
        for run in results
    ]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    summary = {
        **meta,
        "configurations": [summary.as_dict() for summary in summaries],
        "runs": [run.as_dict() for run in results],
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if plot_note:
        print(plot_note)
    return ["report.md", "summary.json", *plots]


def _plots(folder: Path, summaries: Sequence[ConfigSummary]) -> tuple[list[str], str]:
    plots = PlotFolder.open(folder)
    if plots is None:
        return [], NO_PLOTS
    plots.save("throughput.png", partial(_throughput_plot, summaries))
    size = (9, 0.6 * len(summaries) + 1.5)
    plots.save("cpu_per_job.png", partial(_cpu_plot, summaries), size)
    return plots.written, ""


def _throughput_plot(summaries: Sequence[ConfigSummary], figure: Any) -> None:
    axes = figure.subplots()
    for summary in summaries:
        run = summary.runs[0]
        width = 0.25
        buckets: dict[int, int] = {}
        for at in run.finishes:
            index = int((at - run.first_start) / width)
            buckets[index] = buckets.get(index, 0) + 1
        xs = [i * width for i in range(max(buckets, default=0) + 1)]
        ys = [buckets.get(i, 0) / width for i in range(len(xs))]
        style = "-" if summary.system == "tenantq" else "--"
        axes.plot(xs, ys, style, linewidth=1.5, label=f"{summary.label} (run 1)")
    axes.set_xlabel("seconds since the first job started")
    axes.set_ylabel("jobs finished per second (0.25 s bins)")
    axes.set_title("Throughput draining the backlog")
    axes.legend(fontsize="small")


def _cpu_plot(summaries: Sequence[ConfigSummary], figure: Any) -> None:
    axes = figure.subplots()
    labels = [summary.label for summary in summaries]
    left = [0.0] * len(summaries)
    for column in (WORKER, KAFKA, POSTGRES):
        values = [summary.cpu(column) or 0.0 for summary in summaries]
        axes.barh(labels, values, left=left, label=column)
        left = [a + b for a, b in zip(left, values, strict=True)]
    everything = [
        (summary.cpu("total") or 0.0)
        - (summary.cpu(POSTGRES) or 0.0)
        + (summary.cpu("postgres (all)") or 0.0)
        for summary in summaries
    ]
    axes.scatter(everything, labels, marker="|", s=200, color="black", label="with Postgres (all)")
    axes.invert_yaxis()
    axes.set_xlabel("CPU microseconds per job (median run)")
    axes.set_title("CPU per job by process group")
    axes.legend(fontsize="small", loc="lower right")
