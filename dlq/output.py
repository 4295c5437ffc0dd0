"""How `tenantq dlq` shows dead letters and replay results at a terminal.

Everything read from a topic is shown through ``printable`` inside ``rich`` ``Text``: a record's
headers, envelope and error message are anyone's text, and must neither be read as ``rich``
markup (``[/]`` in an error message would end the command) nor reach the terminal as escape
sequences.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tenantq.dlq.header_values import printable
from tenantq.dlq.purge import PurgePlan
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay import ReplayReport

#: Replay outcomes listed one per line; the summary counts all of them.
OUTCOMES_SHOWN = 50


def letters_table(letters: Iterable[DeadLetter], title: str) -> Table:
    """One row per dead letter; an unreadable one says so, and why, in its last columns."""
    table = Table(title=title, title_justify="left")
    for column in ("dlq", "dead at", "job id", "tenant", "job type", "error", "att", "message"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        if letter.unreadable:
            error = Text("UNREADABLE", style="bold red")
            message = _text(f"{letter.unreadable_reason} (tenantq dlq show {letter.position})", 160)
        else:
            error = _text(letter.error_class, 80)
            message = _text(" ".join(letter.error_message.split()), 60)
        table.add_row(
            letter.position,
            letter.dead_at.strftime("%Y-%m-%d %H:%M:%S") if letter.dead_at else "-",
            str(letter.job_id or "-"),
            _text(letter.tenant or "-", 64),
            _text(letter.job_type or "-", 64),
            error,
            "-" if letter.attempts is None else str(letter.attempts),
            message,
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
    """Everything about one dead letter: where, why, headers, envelope and payload. An
    unreadable one shows what could be read: where it sits, its timestamp, why it does not
    parse, and every header escaped."""
    data = letter.as_dict(full=True)
    title = f"{'UNREADABLE ' if letter.unreadable else ''}dead letter {letter.position}"
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name in (
        "topic", "timestamp_ms", "unreadable_reason", "job_id", "job_type", "tenant",
        "error_class", "error_message", "attempts", "worker", "source_topic",
        "source_partition", "source_offset", "dead_at", "replayable", "undecodable_reason",
        "key", "value_bytes",
    ):  # fmt: skip
        table.add_row(name, "-" if data[name] is None else _text(str(data[name]), 4_000))
    if job_row is not None:
        table.add_row(
            "job row",
            _text(
                f"{job_row['state']}, attempts {job_row['attempts']}/{job_row['max_attempts']}, "
                f"replays {job_row['replays']}"
            ),
        )
    else:
        table.add_row("job row", "none")
    console.print(table)
    headers = Table(title="headers (escaped)", title_justify="left", show_header=False)
    headers.add_column("name", style="bold", overflow="fold")
    headers.add_column("value", overflow="fold")
    for name, value in letter.raw_headers():
        headers.add_row(Text(name), Text(value))
    console.print(headers)
    if data["envelope"] is not None:
        console.print("[bold]envelope[/]")
        # JSON leaves DEL and the C1 controls as they are: each line through ``printable``.
        shown = json.dumps(data["envelope"], default=str, indent=2, ensure_ascii=False)
        console.print(Text("\n".join(printable(line, 4_000) for line in shown.splitlines())))


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
                str(letter.job_id or letter.position),
                _text(letter.tenant or "-", 64),
                _text(letter.job_type or "-", 64),
                Text("UNREADABLE", style="red") if letter.unreadable else _text(letter.error_class),
                verb + outcome.action,
                _text(outcome.detail),
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
        console.print(_text(f"  skipped {count}: {reason}", 400))
    if report.unreadable:
        console.print(
            f"[yellow]skipped {report.unreadable} unreadable record(s)[/]: they do not parse and "
            "are never replayed (`tenantq dlq list` shows them, `tenantq dlq show P@O` each)"
        )
    if report.canary:
        console.print(_text(report.canary, 400))
    if report.failed_ids:
        console.print(
            f"[red]{len(report.failed_ids)} publish(es) not acknowledged[/]: their rows are "
            "runnable without a message; run the same replay again to publish them"
        )
    if report.stopped:
        console.print(Text("stopped: ", style="red") + _text(report.stopped, 400))
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
        f"{f' ({states})' if states else ''}, {plan.undecodable} undecodable, "
        f"{plan.unreadable} unreadable (no job named for them)"
    )
    still_dead = plan.job_states.get("dead", 0)
    if still_dead:
        console.print(
            f"[yellow]{still_dead} of these jobs are still dead[/]: after the purge they can no "
            "longer be replayed from the DLQ (their rows keep the payload)"
        )


def _text(text: str, limit: int = 200) -> Text:
    """Text from a topic as a ``rich`` cell: escaped (``printable``), never markup."""
    return Text(printable(text, limit))
