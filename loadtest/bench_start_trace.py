"""Where a tenantq job's enqueue-to-start time goes at half load (``throughput_bench.py
--start-trace DIR``).

Three sources, one folder per run (``DIR/<run tag>/``):

- ``<pid>.bin`` of each worker process: the stages of each job on its start path, stamped by
  the worker (``start_trace``);
- ``jobs.csv``: each half-load job's id, ``enqueued_at`` (the producer's stamp) and
  ``started_at`` (the claim statement's ``now()``), from the ledger;
- ``activity.csv``: this run's backends in ``pg_stat_activity`` every few milliseconds
  through the half-load phase (application name, state, wait event, how long the statement
  had been running).

``python loadtest/bench_start_trace.py DIR`` prints, per run, the p50 / p99 / max of each
stage's share of the time, for all jobs and for the slowest 1 %, and what the claims
backends were waiting on while the slowest jobs waited.
"""

from __future__ import annotations

import argparse
import csv
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psycopg
from bench_run import percentile
from start_trace import STAGES, decode

#: Each gap is named by the stage it ends at.
GAPS = {
    "produced": "SDK to produce() (enqueue -> Kafka timestamp, ms)",
    "read": "broker, fetch, poll wait (Kafka timestamp -> read)",
    "routed": "decode in the poll loop (read -> routed)",
    "submitted": "wait for a claim slot (routed -> submitted)",
    "sent": "queued behind the lane's claim (submitted -> sent)",
    "committed": "claim statement + commit (sent -> committed)",
    "applied": "answer to the poll thread (committed -> applied)",
    "handed": "applied -> handed to the executor",
    "handler": "executor -> handler runs",
}
#: Steps taken together: (name, from the stage before the first, to the last).
GROUPS = (
    ("SDK, broker, fetch, decode (enqueue -> routed)", "produced", "routed"),
    (
        "claims pipeline: dispatcher, lane queue, claim (routed -> committed)",
        "submitted",
        "committed",
    ),
    ("answer, hand-over, handler running (committed -> handler)", "applied", "handler"),
)
SAMPLE_SECONDS = 0.005

ACTIVITY = (
    "SELECT coalesce(application_name, ''), coalesce(state, ''),"
    " coalesce(wait_event_type, ''), coalesce(wait_event, ''),"
    " coalesce(extract(epoch FROM clock_timestamp() - query_start)::float8, 0)"
    " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
HALF_LOAD_JOBS = (
    "SELECT id, extract(epoch FROM enqueued_at)::float8, extract(epoch FROM started_at)::float8"
    " FROM tenantq_jobs WHERE queue = %s AND enqueued_at >= to_timestamp(%s)"
)


class ActivitySampler:
    """Turns the workers' tracing on (``start_trace``: the flag file ``on``) and samples
    ``pg_stat_activity`` of the run's database on a connection of its own, in a thread, into
    ``activity.csv``, until ``stop``."""

    def __init__(self, url: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "on").touch()
        # The workers look for the flag every half second: the phase starts after they saw it.
        time.sleep(0.6)
        self._path = folder / "activity.csv"
        self._connection = psycopg.connect(url, autocommit=True, application_name="start-trace")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._path.open("w", newline="") as file:
            writer = csv.writer(file)
            while not self._stop.is_set():
                now = time.time()
                for row in self._connection.execute(ACTIVITY).fetchall():
                    writer.writerow([f"{now:.6f}", *row])
                self._stop.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        (self._path.parent / "on").unlink(missing_ok=True)
        self._thread.join(5)
        self._connection.close()


def save_jobs(connection: psycopg.Connection[Any], queue: str, since: float, folder: Path) -> None:
    """The half-load jobs' ids and ledger stamps into ``jobs.csv``."""
    rows = connection.execute(HALF_LOAD_JOBS, (queue, since)).fetchall()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "jobs.csv").open("w", newline="") as file:
        csv.writer(file).writerows(rows)


def _load_stages(folder: Path) -> dict[uuid.UUID, dict[str, float]]:
    stages: dict[uuid.UUID, dict[str, float]] = defaultdict(dict)
    for path in folder.glob("[0-9]*.bin"):
        for stage, job_id, at in decode(path.read_bytes()):
            # The first time a job reached a stage (a claim run again keeps its first).
            stages[job_id].setdefault(stage, at)
    return stages


def report(folder: Path) -> list[str]:
    """The breakdown of one run's folder, as lines."""
    jobs: dict[uuid.UUID, tuple[float, float]] = {}
    with (folder / "jobs.csv").open() as file:
        for job_id, enqueued, started in csv.reader(file):
            if started:
                jobs[uuid.UUID(job_id)] = (float(enqueued), float(started))
    stages = _load_stages(folder)
    rows = []
    for job_id, (enqueued, started) in jobs.items():
        seen = stages.get(job_id, {})
        if not all(stage in seen for stage in STAGES):
            continue
        times = [enqueued, *(seen[stage] for stage in STAGES)]
        gaps = {stage: times[i + 1] - times[i] for i, stage in enumerate(STAGES)}
        rows.append((started - enqueued, times[-1] - enqueued, gaps, seen))
    lines = [f"## {folder.name}: {len(rows):,} of {len(jobs):,} half-load jobs traced"]
    if not rows:
        return lines
    ledger = [row[0] for row in rows]
    real = [row[1] for row in rows]
    lines.append(
        f"enqueue->started_at (ledger): p50 {percentile(ledger, 0.5) * 1000:.1f} ms,"
        f" p99 {percentile(ledger, 0.99) * 1000:.1f} ms; enqueue->handler runs: p50"
        f" {percentile(real, 0.5) * 1000:.1f}, p99 {percentile(real, 0.99) * 1000:.1f} ms"
    )
    threshold = percentile(real, 0.99)
    slow = [row for row in rows if row[1] >= threshold]
    lines.append(
        f"| stage | p50 ms | p99 ms | max ms | mean in slowest 1 % ({len(slow)}) ms |\n"
        "| --- | ---: | ---: | ---: | ---: |"
    )
    for stage in STAGES:
        values = [row[2][stage] for row in rows]
        slow_mean = sum(row[2][stage] for row in slow) / len(slow)
        lines.append(
            f"| {GAPS[stage]} | {percentile(values, 0.5) * 1000:.1f} |"
            f" {percentile(values, 0.99) * 1000:.1f} | {max(values) * 1000:.1f} |"
            f" {slow_mean * 1000:.1f} |"
        )
    for name, first, last in GROUPS:
        chosen = STAGES[STAGES.index(first) : STAGES.index(last) + 1]
        values = [sum(row[2][stage] for stage in chosen) for row in rows]
        slow_mean = sum(sum(row[2][stage] for stage in chosen) for row in slow) / len(slow)
        lines.append(
            f"| {name} | {percentile(values, 0.5) * 1000:.1f} |"
            f" {percentile(values, 0.99) * 1000:.1f} | {max(values) * 1000:.1f} |"
            f" {slow_mean * 1000:.1f} |"
        )
    lines.extend(_activity_lines(folder, slow))
    return lines


def _activity_lines(folder: Path, slow: list[Any]) -> list[str]:
    """What the claims and results backends were doing while the slowest jobs' claims ran
    (sent -> committed) against the whole phase."""
    path = folder / "activity.csv"
    if not path.exists():
        return []
    windows = sorted({(row[3]["sent"], row[3]["committed"]) for row in slow})
    everywhere: Counter[str] = Counter()
    in_slow: Counter[str] = Counter()
    longest: dict[str, float] = defaultdict(float)
    with path.open() as file:
        for at_text, name, state, wait_type, wait, running in csv.reader(file):
            role = name.split(" ")[0] or "unnamed"
            if "claim" not in role and "result" not in role:
                continue
            what = f"{role}: {state}" + (f" {wait_type}/{wait}" if wait else "")
            everywhere[what] += 1
            at = float(at_text)
            if state == "active":
                longest[role] = max(longest[role], float(running))
            if any(start <= at <= end for start, end in windows):
                in_slow[what] += 1
    lines = ["backends sampled every 5 ms: state / wait (all samples; while a slow claim ran)"]
    for what, count in everywhere.most_common(12):
        lines.append(f"- {what}: {count} ; {in_slow.get(what, 0)}")
    for role, seconds in sorted(longest.items()):
        lines.append(f"- longest statement seen running, {role}: {seconds * 1000:.0f} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the --start-trace folder")
    arguments = parser.parse_args()
    for run in sorted(path for path in arguments.folder.iterdir() if path.is_dir()):
        if (run / "jobs.csv").exists():
            print("\n".join(report(run)), end="\n\n")


if __name__ == "__main__":
    main()
