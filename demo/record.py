"""What one ``tenantq demo`` run is given (``DemoOptions``) and what it produced (``DemoRun``),
read by the report and its plots."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from tenantq.demo.kafka import DeadLetterReport
from tenantq.demo.monitor import Sample
from tenantq.demo.plan import TENANT_CLASSES, Workload
from tenantq.store.job_sets import JobOutcome


@dataclass(frozen=True)
class DemoOptions:
    """The knobs of one demo run (their defaults are the command line's, ``tenantq demo``)."""

    jobs: int
    tenants: int
    processes: int
    concurrency: int
    seed: int
    timeout: float
    report_dir: Path | None
    delete_topics: bool


@dataclass
class DemoRun:
    """Everything one run produced: the plan, the jobs' final rows, the DLQ and the samples."""

    options: DemoOptions
    prefix: str
    workload: Workload
    job_ids: list[uuid.UUID]
    outcomes: list[JobOutcome]
    dead_letters: DeadLetterReport
    samples: list[Sample]
    crashes: int
    pool_exit: int | None
    timed_out: bool
    started_wall: float

    def latencies(self) -> dict[str, list[float]]:
        """Enqueue-to-finished seconds of every finished job, per tenant class and overall."""
        classes = self.workload.tenant_classes
        result: dict[str, list[float]] = {name: [] for name in ("all", *TENANT_CLASSES)}
        for outcome in self.outcomes:
            if outcome.finished_at is None or outcome.enqueued_at is None:
                continue
            latency = max(0.0, outcome.finished_at - outcome.enqueued_at)
            result["all"].append(latency)
            result[classes.get(outcome.tenant, "light")].append(latency)
        return result
