"""The figures of the quota load test, from the handlers' own notes (``quota_app``): when each
attempt began and ended, by tenant. Nothing here reads tenantq's metrics or job rows.

| scenario | figure                                                         | target            |
| -------- | -------------------------------------------------------------- | ----------------- |
| cap      | attempts of the tenant running at once, at most               | <= the cap        |
|          | share of the run (first begin to last end) at cap - 1 or more  | most of it        |
| rate     | starts per whole second after the first (the burst's)          | rate +/- 10%      |
|          | starts in any second (the first included)                      | <= rate + burst   |
| weights  | the heavier tenant's share of the starts while both had work   | w / (w + 1) +/- .1|
| crash    | attempts running at once, at most (a killed attempt ends at    | <= the cap        |
|          | the kill)                                                      |                   |
|          | from the kill to the tenant at its cap again                   | < the lease       |
| backlog  | CPU of the workers (every process) while the capped tenant's   | near idle         |
|          | backlog waits, in cores                                        |                   |
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tenantq.demo.plots import NO_PLOTS, PlotFolder


@dataclass
class Attempt:
    """One attempt as its handler noted it (``ended`` None: its process died first)."""

    job_id: str
    attempt: int
    tenant: str
    began: float
    ended: float | None = None


def read_attempts(folder: Path) -> list[Attempt]:
    """Every attempt noted in ``folder`` (a file per handler process). An attempt run again
    under the same number (its process died: the crash gives the attempt back) is a run of
    its own, in another process's file."""
    attempts: dict[tuple[str, str, int], Attempt] = {}
    for path in sorted(folder.glob("*.txt")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 5:
                continue  # a line cut short by a kill
            kind, job_id, attempt, tenant, at = parts
            key = (path.stem, job_id, int(attempt))
            if kind == "b":
                attempts[key] = Attempt(job_id, int(attempt), tenant, float(at))
            elif kind == "e" and key in attempts:
                attempts[key].ended = float(at)
    return sorted(attempts.values(), key=lambda attempt: attempt.began)


def running_steps(
    attempts: Iterable[Attempt], tenant: str, unfinished_end: float
) -> list[tuple[float, int]]:
    """(time, attempts of ``tenant`` running from then on), one step per change; an attempt
    that never ended counts until ``unfinished_end`` (the kill, or the run's end)."""
    events: list[tuple[float, int]] = []
    for attempt in attempts:
        if attempt.tenant != tenant:
            continue
        events.append((attempt.began, 1))
        events.append((attempt.ended if attempt.ended is not None else unfinished_end, -1))
    # Ends before begins at one instant: a slot handed straight on is not two at once.
    events.sort(key=lambda event: (event[0], event[1]))
    steps: list[tuple[float, int]] = []
    running = 0
    for at, change in events:
        running += change
        if steps and steps[-1][0] == at:
            steps[-1] = (at, running)
        else:
            steps.append((at, running))
    return steps


def share_of_time_at_least(steps: list[tuple[float, int]], level: int) -> float:
    """The share of the time from the first step to the last with ``level`` or more running."""
    if len(steps) < 2:
        return 0.0
    total = steps[-1][0] - steps[0][0]
    at_least = sum(
        following[0] - step[0]
        for step, following in zip(steps, steps[1:], strict=False)
        if step[1] >= level
    )
    return at_least / total if total > 0 else 0.0


def starts_per_second(starts: list[float]) -> list[int]:
    """Starts in each whole second from the first start (the last, partial second left out
    unless it is the only one)."""
    if not starts:
        return []
    first = starts[0]
    seconds = int(starts[-1] - first) + 1
    counts = [0] * seconds
    for at in starts:
        counts[min(seconds - 1, int(at - first))] += 1
    return counts[:-1] if seconds > 1 else counts


def most_in_any_second(starts: list[float]) -> int:
    """The most starts in any one-second span (sliding)."""
    return max(
        (bisect.bisect_left(starts, at + 1.0) - index for index, at in enumerate(starts)),
        default=0,
    )


@dataclass
class Figures:
    """What a run measured, and whether each target held."""

    scenario: str
    numbers: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, bool] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(self.targets.values())


def cap_figures(attempts: list[Attempt], tenant: str, cap: int, end: float) -> Figures:
    steps = running_steps(attempts, tenant, end)
    most = max((running for _, running in steps), default=0)
    at_cap = share_of_time_at_least(steps, cap - 1)
    figures = Figures("cap")
    figures.numbers.update(
        attempts=sum(1 for a in attempts if a.tenant == tenant),
        max_running=most,
        share_of_time_at_cap_or_one_below=round(at_cap, 3),
        seconds=round(steps[-1][0] - steps[0][0], 2) if steps else 0.0,
    )
    figures.targets.update(
        {f"never above {cap}": most <= cap, f"at {cap - 1}-{cap} most of the run": at_cap > 0.5}
    )
    return figures


def rate_figures(attempts: list[Attempt], tenant: str, rate: float, burst: int) -> Figures:
    starts = sorted(a.began for a in attempts if a.tenant == tenant)
    per_second = starts_per_second(starts)
    after = per_second[1:]
    mean_after = sum(after) / len(after) if after else 0.0
    figures = Figures("rate")
    figures.numbers.update(
        attempts=len(starts),
        starts_per_second=per_second,
        mean_after_first_second=round(mean_after, 2),
        low_after_first_second=min(after, default=0),
        high_after_first_second=max(after, default=0),
        most_in_any_second=most_in_any_second(starts),
        first_second=per_second[0] if per_second else 0,
    )
    low, high = 0.9 * rate, 1.1 * rate
    figures.targets.update(
        {
            f"{low:g}-{high:g} starts/s after the burst": bool(after)
            and all(low <= count <= high for count in after),
            f"no second above {rate + burst:g}": max(per_second, default=0) <= rate + burst,
        }
    )
    return figures


def weight_figures(attempts: list[Attempt], heavy: str, light: str, weight: int) -> Figures:
    starts = sorted((a.began, a.tenant) for a in attempts if a.tenant in (heavy, light))
    last = {
        tenant: max((at for at, who in starts if who == tenant), default=0.0)
        for tenant in (heavy, light)
    }
    both_until = min(last.values())
    while_both = [who for at, who in starts if at <= both_until]
    share = while_both.count(heavy) / len(while_both) if while_both else 0.0
    expected = weight / (weight + 1)
    figures = Figures("weights")
    figures.numbers.update(
        attempts={tenant: sum(1 for _, who in starts if who == tenant) for tenant in last},
        starts_while_both=len(while_both),
        heavy_share_while_both=round(share, 3),
        expected_share=round(expected, 3),
        both_had_work_seconds=round(both_until - starts[0][0], 2) if starts else 0.0,
    )
    figures.targets[f"heavy share {expected - 0.1:.2f}-{expected + 0.1:.2f}"] = (
        expected - 0.1 <= share <= expected + 0.1
    )
    return figures


def crash_figures(
    attempts: list[Attempt], tenant: str, cap: int, killed_at: float, lease_seconds: float
) -> Figures:
    steps = running_steps(attempts, tenant, killed_at)
    most = max((running for _, running in steps), default=0)
    before = [running for at, running in steps if at < killed_at]
    after_kill = [(at, running) for at, running in steps if at >= killed_at]
    lowest_after = min((running for _, running in after_kill), default=0)
    back = next((at for at, running in after_kill if running >= cap and at > killed_at), None)
    figures = Figures("crash")
    figures.numbers.update(
        attempts=sum(1 for a in attempts if a.tenant == tenant),
        killed_attempts=sum(1 for a in attempts if a.tenant == tenant and a.ended is None),
        max_running=most,
        running_at_kill=before[-1] if before else 0,
        lowest_after_kill=lowest_after,
        back_at_cap_seconds=round(back - killed_at, 2) if back is not None else None,
        lease_seconds=lease_seconds,
    )
    figures.targets.update(
        {
            f"never above {cap}": most <= cap,
            f"back at {cap} within one lease ({lease_seconds:g} s)": back is not None
            and back - killed_at <= lease_seconds,
        }
    )
    return figures


# -- plots --


def plot_running(
    plots: PlotFolder, name: str, steps: list[tuple[float, int]], cap: int, origin: float,
    killed_at: float | None = None,
) -> None:  # fmt: skip
    def draw(figure: Any) -> None:
        axes = figure.subplots()
        axes.step([at - origin for at, _ in steps], [r for _, r in steps], where="post",
                  label="running (handlers' notes)")  # fmt: skip
        axes.axhline(cap, color="red", linestyle="--", label=f"max_running {cap}")
        if killed_at is not None:
            axes.axvline(killed_at - origin, color="black", linestyle=":", label="member killed")
        axes.set_xlabel("seconds")
        axes.set_ylabel("attempts running at once, fleet-wide")
        axes.set_ylim(0, cap + 2)
        axes.legend(loc="lower right")

    plots.save(name, draw)


def plot_rate(plots: PlotFolder, per_second: list[int], rate: float, burst: int) -> None:
    def draw(figure: Any) -> None:
        axes = figure.subplots()
        axes.bar(range(len(per_second)), per_second, label="starts in the second")
        axes.axhline(rate, color="red", linestyle="--", label=f"rate {rate:g}/s")
        axes.axhline(rate + burst, color="grey", linestyle=":", label=f"rate + burst {burst}")
        axes.set_xlabel("second since the first start")
        axes.set_ylabel("starts")
        axes.legend(loc="lower right")

    plots.save("rate_starts_per_second.png", draw)


def plot_shares(
    plots: PlotFolder, attempts: list[Attempt], heavy: str, light: str, weight: int
) -> None:
    starts = sorted((a.began, a.tenant) for a in attempts if a.tenant in (heavy, light))
    if not starts:
        return
    origin = starts[0][0]
    seconds = int(starts[-1][0] - origin) + 1
    counts = [[0, 0] for _ in range(seconds)]
    for at, who in starts:
        counts[int(at - origin)][0 if who == heavy else 1] += 1
    shares = [h / (h + lt) if h + lt else None for h, lt in counts]

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        axes.plot(range(seconds), shares, marker="o", label=f"{heavy}'s share of the starts")
        axes.axhline(weight / (weight + 1), color="red", linestyle="--",
                     label=f"weights {weight}:1")  # fmt: skip
        axes.set_ylim(0, 1)
        axes.set_xlabel("second since the first start")
        axes.set_ylabel("share of the starts in the second")
        axes.legend(loc="lower right")

    plots.save("weights_shares.png", draw)


def write_report(
    folder: Path, runs: list[Figures], header: list[str], plots: list[str], note: str
) -> None:
    """``report.md`` and ``summary.json`` in ``folder``."""
    lines = ["# Tenant quotas: load test", "", *header, ""]
    for figures in runs:
        lines.append(f"## {figures.scenario}: {'passed' if figures.passed else 'FAILED'}")
        lines.append("")
        for target, held in figures.targets.items():
            lines.append(f"- {'✓' if held else '✗'} {target}")
        lines.append("")
        lines.append("```json")
        lines.append(json.dumps(figures.numbers, indent=2))
        lines.append("```")
        lines.append("")
    lines += [note] if note else [f"![{name}]({name})" for name in plots]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text(
        json.dumps([asdict(figures) for figures in runs], indent=2) + "\n"
    )


__all__ = ["NO_PLOTS", "PlotFolder"]
