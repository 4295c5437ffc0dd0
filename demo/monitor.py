"""Live progress of ``tenantq demo``: samples Postgres (jobs by state, retries, oldest
runnable age) and Kafka (per-partition lag, DLQ size) and draws them with rich.

Samples are kept for the report's plots. Postgres is the truth about jobs; Kafka only says
how far the consumer group has read, which is what lag plots are for.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.table import Table

from tenantq.demo.kafka import LagProbe
from tenantq.store.engine import DeploymentConnection
from tenantq.store.job_sets import job_set_oldest_runnable_age, job_set_state_counts

STATES = ("pending", "runnable", "leased", "retrying", "succeeded", "dead", "canceled")
#: Throughput is measured over this trailing window of samples.
RATE_WINDOW_SECONDS = 5.0


@dataclass(frozen=True)
class Sample:
    """The system at one moment, ``at`` seconds after the run started."""

    at: float
    enqueued: int
    by_state: dict[str, int]
    retries: int
    oldest_runnable_age: float | None
    dead_letters: int
    lag: dict[int, int]
    #: The group's committed offset per partition of the main topic.
    committed: dict[int, int] = field(default_factory=dict)

    @property
    def terminal(self) -> int:
        return sum(self.by_state.get(state, 0) for state in ("succeeded", "dead", "canceled"))


def longest_stall(samples: Sequence[Sample]) -> tuple[float, int | None]:
    """(seconds, partition): the longest time a partition of the main topic had lag while its
    committed offset did not move — what a crashed member's partitions show until the group
    moves them. Auto-commit runs every second, so a moving partition shows ~1 s at most."""
    worst: tuple[float, int | None] = (0.0, None)
    since: dict[int, tuple[float, int]] = {}
    for sample in samples:
        for partition, lag in sample.lag.items():
            committed = sample.committed.get(partition)
            if committed is None:
                continue
            start = since.get(partition)
            if lag == 0 or start is None or committed != start[1]:
                since[partition] = (sample.at, committed)
                continue
            stalled = sample.at - start[0]
            if stalled > worst[0]:
                worst = (stalled, partition)
    return worst


@dataclass
class Monitor:
    """Takes samples of one demo run and renders the latest one."""

    connection: DeploymentConnection
    probe: LagProbe
    job_ids: Sequence[uuid.UUID]
    enqueued: Callable[[], int]
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> Sample:
        counts = job_set_state_counts(self.connection, self.job_ids)
        taken = Sample(
            at=time.monotonic() - self.started,
            enqueued=self.enqueued(),
            by_state=counts.by_state,
            retries=counts.retries,
            oldest_runnable_age=job_set_oldest_runnable_age(self.connection, self.job_ids),
            dead_letters=self.probe.dead_letters(),
            lag=self.probe.lag(),
            committed=dict(self.probe.committed),
        )
        self.samples.append(taken)
        return taken

    def rate(self) -> float:
        """Jobs reaching a terminal state per second, over the last few seconds."""
        if len(self.samples) < 2:
            return 0.0
        last = self.samples[-1]
        earlier = [s for s in self.samples if s.at <= last.at - RATE_WINDOW_SECONDS]
        first = earlier[-1] if earlier else self.samples[0]
        span = last.at - first.at
        return (last.terminal - first.terminal) / span if span > 0 else 0.0

    def render(self, total: int, title: str) -> Table:
        """A table of the latest sample."""
        table = Table(title=title, show_header=False, title_justify="left", min_width=60)
        table.add_column("what", style="bold")
        table.add_column("value", justify="right")
        if not self.samples:
            table.add_row("starting", "...")
            return table
        last = self.samples[-1]
        table.add_row("elapsed", f"{last.at:6.1f} s")
        table.add_row("enqueued", f"{last.enqueued:,} / {total:,}")
        table.add_row("terminal", f"{last.terminal:,} / {total:,}")
        for state in STATES:
            table.add_row(f"  {state}", f"{last.by_state.get(state, 0):,}")
        unseen = max(0, last.enqueued - sum(last.by_state.values()))
        table.add_row("  in Kafka, not yet claimed", f"{unseen:,}")
        table.add_row("throughput", f"{self.rate():,.0f} jobs/s")
        age = last.oldest_runnable_age
        table.add_row("oldest runnable age", "-" if age is None else f"{age:.1f} s")
        table.add_row("retries so far", f"{last.retries:,}")
        table.add_row("consumer lag (main topic)", f"{sum(last.lag.values()):,}")
        table.add_row("dead letters (DLQ)", f"{last.dead_letters:,}")
        return table
