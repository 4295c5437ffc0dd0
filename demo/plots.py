"""PNG plots of a demo run: throughput over time, latency distribution per tenant class, and
consumer lag per partition over time. matplotlib is optional (``pip install tenantq[report]``):
without it the report is written without plots and says so. ``PlotFolder`` is how every
report of the project (the demo's, the load tests') draws and saves its figures."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantq.demo.record import DemoRun

#: What a report says in place of its plots when matplotlib is not installed.
NO_PLOTS = "_No plots: matplotlib is not installed (`pip install 'tenantq[report]'`)._"


class PlotFolder:
    """Figures drawn into ``folder`` as PNG files; ``written`` names the files saved, in order.

    matplotlib draws to files only (no display needed, none opened), and every figure is
    closed however its drawing ends, so a long report does not pile up open figures.
    """

    def __init__(self, pyplot: Any, folder: Path) -> None:
        self._pyplot = pyplot
        self.folder = folder
        self.written: list[str] = []

    @classmethod
    def open(cls, folder: Path) -> PlotFolder | None:
        """Figures into ``folder``; None when matplotlib is not installed."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as pyplot
        except ImportError:
            return None
        return cls(pyplot, folder)

    def save(
        self, name: str, draw: Callable[[Any], None], size: tuple[float, float] = (9, 4.5)
    ) -> None:
        """A new figure of ``size`` inches, drawn by ``draw(figure)``, saved as ``name``."""
        figure = self._pyplot.figure(figsize=size, dpi=100)
        try:
            draw(figure)
            figure.tight_layout()
            figure.savefig(self.folder / name)
            self.written.append(name)
        finally:
            self._pyplot.close(figure)


def write_plots(run: DemoRun, folder: Path) -> tuple[list[str], str]:
    """Write the plots into ``folder``; returns their file names and a note for the report."""
    plots = PlotFolder.open(folder)
    if plots is None:
        return [], NO_PLOTS
    plots.save("throughput.png", lambda figure: _throughput(run, figure.subplots()))
    plots.save("latency.png", lambda figure: _latency(run, figure.subplots()))
    plots.save("partition_lag.png", lambda figure: _partition_lag(run, figure.subplots()))
    return plots.written, ""


def _throughput(run: DemoRun, axes: Any) -> None:
    finished = [o.finished_at - run.started_wall for o in run.outcomes if o.finished_at]
    enqueued = [o.enqueued_at - run.started_wall for o in run.outcomes if o.enqueued_at]
    end = math.ceil(max(finished, default=1.0)) + 1
    bins = list(range(0, end + 1))
    axes.hist(enqueued, bins=bins, histtype="step", linewidth=1.5, label="enqueued")
    axes.hist(finished, bins=bins, histtype="step", linewidth=1.5, label="finished")
    dead = [
        o.finished_at - run.started_wall
        for o in run.outcomes
        if o.finished_at and o.state == "dead"
    ]
    for moment in dead:
        axes.axvline(moment, color="red", alpha=0.3, linewidth=0.8)
    axes.set_xlabel("seconds since start (red: a job went dead)")
    axes.set_ylabel("jobs per second")
    axes.set_title("Throughput")
    axes.legend()


def _latency(run: DemoRun, axes: Any) -> None:
    latencies = run.latencies()
    positive = [value for value in latencies["all"] if value > 0]
    if not positive:
        axes.set_title("Latency: no finished jobs")
        return
    low, high = min(positive), max(positive)
    edges = [low * (high / low) ** (i / 50) for i in range(51)] if high > low else [low, low * 2]
    for name in ("hot", "heavy", "light"):
        values = [value for value in latencies[name] if value > 0]
        if values:
            axes.hist(values, bins=edges, histtype="step", linewidth=1.5, label=f"{name} tenants")
    axes.set_xscale("log")
    axes.set_xlabel("enqueue -> finished, seconds (log scale; the right tail is retries)")
    axes.set_ylabel("jobs")
    axes.set_title("Latency distribution")
    axes.legend()


def _partition_lag(run: DemoRun, axes: Any) -> None:
    samples = [s for s in run.samples if s.lag]
    partitions = sorted({p for s in samples for p in s.lag})
    for partition in partitions:
        axes.plot(
            [s.at for s in samples],
            [s.lag.get(partition, 0) for s in samples],
            linewidth=1,
            label=f"p{partition}",
        )
    axes.set_xlabel("seconds since start")
    axes.set_ylabel("messages not yet committed")
    axes.set_title("Consumer lag per partition of the main topic")
    if partitions:
        axes.legend(ncol=6, fontsize="small")
