"""How `tenantq dlq` shows dead letters and replay results at a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from tenantq.dlq.purge import PurgePlan
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay import ReplayReport

#: Replay outcomes listed one per line; the summary counts all of them.
OUTCOMES_SHOWN = 50


def letters_table(letters: Iterable[DeadLetter], title: str) -> Table:
    """One row per dead letter, newest information first in each row."""
    table = Table(title=title, title_justify="left")
    for column in ("dlq", "dead at", "job id", "tenant", "job type", "error", "att", "message"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        table.add_row(
            f"{letter.dlq_partition}@{letter.dlq_offset}",
            letter.dead_at.strftime("%Y-%m-%d %H:%M:%S"),
            str(letter.job_id or "-"),
            letter.tenant or "-",
            letter.job_type or "-",
            letter.error_class,
            "-" if letter.attempts is None else str(letter.attempts),
            _short(letter.error_message, 60),
        )
    return table


def stream_json(console: Console, letters: Iterable[DeadLetter], *, full: bool = False) -> int:
    """A JSON array written record by record (memory stays bounded); returns the count."""
    count = 0
    console.out("[", highlight=False)
    for letter in letters:
        prefix = "," if count else ""
        console.out(prefix + json.dumps(letter.as_dict(full=full)), highlight=False)
        count += 1
    console.out("]", highlight=False)
    return count


def show_letter(console: Console, letter: DeadLetter, job_row: dict[str, Any] | None) -> None:
    """Everything about one dead letter: where, why, headers, envelope and payload."""
    data = letter.as_dict(full=True)
    table = Table(
        title=f"dead letter {letter.dlq_partition}@{letter.dlq_offset}",
        title_justify="left",
        show_header=False,
    )
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name in (
        "job_id", "job_type", "tenant", "error_class", "error_message", "attempts", "worker",
        "source_topic", "source_partition", "source_offset", "dead_at", "replayable",
        "undecodable_reason", "key", "value_bytes",
    ):  # fmt: skip
        table.add_row(name, "-" if data[name] is None else str(data[name]))
    if job_row is not None:
        table.add_row(
            "job row",
            f"{job_row['state']}, attempts {job_row['attempts']}/{job_row['max_attempts']}, "
            f"replays {job_row['replays']}",
        )
    else:
        table.add_row("job row", "none")
    console.print(table)
    console.print("[bold]headers[/]")
    console.print_json(json.dumps(data["headers"]))
    if data["envelope"] is not None:
        console.print("[bold]envelope[/]")
        console.print_json(json.dumps(data["envelope"], default=str))


def replay_summary(console: Console, report: ReplayReport, audit_id: int | None) -> None:
    """The first outcomes, then counts by action and skip reason, and the verdict."""
    verb = "would be " if report.dry_run else ""
    if report.outcomes:
        table = Table(title="dry run" if report.dry_run else "replay", title_justify="left")
        for column in ("job id", "tenant", "job type", "error", "action", "why"):
            table.add_column(column, overflow="fold")
        for outcome in report.outcomes[:OUTCOMES_SHOWN]:
            letter = outcome.letter
            table.add_row(
                str(letter.job_id or "-"),
                letter.tenant or "-",
                letter.job_type or "-",
                letter.error_class,
                verb + outcome.action,
                outcome.detail,
            )
        console.print(table)
        hidden = len(report.outcomes) - OUTCOMES_SHOWN
        if hidden > 0 or report.matched > len(report.outcomes):
            console.print(f"(first {OUTCOMES_SHOWN} of {report.matched} shown)")
    counts = ", ".join(
        f"{count} {verb}{action}" for action, count in sorted(report.actions.items())
    )
    console.print(f"matched {report.matched} DLQ record(s): {counts or 'nothing to do'}")
    for reason, count in report.skip_reasons.most_common():
        console.print(f"  skipped {count}: {reason}")
    if report.canary:
        console.print(report.canary)
    if report.failed_ids:
        console.print(
            f"[red]{len(report.failed_ids)} publish(es) not acknowledged[/]: their rows are "
            "runnable without a message; run the same replay again to publish them"
        )
    if report.stopped:
        console.print(f"[red]stopped:[/] {report.stopped}")
    if audit_id is not None:
        console.print(f"audit row {audit_id}{' (dry run)' if report.dry_run else ''}")


def purge_summary(console: Console, plan: PurgePlan, *, dry_run: bool) -> None:
    """What a purge deletes (or would), per partition, and what the jobs' rows say."""
    table = Table(title=f"{plan.topic} before {plan.until.isoformat()}", title_justify="left")
    for column in ("partition", "from offset", "to offset (excl.)", "records"):
        table.add_column(column, justify="right")
    for partition, (low, cut) in sorted(plan.cuts.items()):
        table.add_row(str(partition), str(low), str(cut), str(max(0, cut - low)))
    console.print(table)
    verb = "would delete" if dry_run else "deletes"
    states = ", ".join(f"{count} {state}" for state, count in plan.job_states.most_common())
    console.print(
        f"{verb} {plan.records} record(s): {len(plan.job_ids)} job(s)"
        f"{f' ({states})' if states else ''}, {plan.undecodable} undecodable"
    )
    still_dead = plan.job_states.get("dead", 0)
    if still_dead:
        console.print(
            f"[yellow]{still_dead} of these jobs are still dead[/]: after the purge they can no "
            "longer be replayed from the DLQ (their rows keep the payload)"
        )


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
