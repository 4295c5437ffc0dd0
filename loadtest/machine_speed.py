"""How fast this machine runs Python right now: a fixed reference workload, timed.

Benchmark figures are only comparable within one sitting (the ratios); across sittings the
box itself changes speed: PgQueuer's best configuration, the same code on the same kind of
machine, did 28,512 jobs/s on the morning of 2026-12-05 and 8,603 that afternoon. A
reference step timed at the start and the end of a run says which kind of sitting it was: two
reports whose steps differ fourfold were made on machines four times apart, whatever the code
did. Lower is faster.

The step is the kind of work a worker's and a producer's Python do per job: a string built,
a dict looked up and written, integer arithmetic.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass

#: Steps per timed pass: about 0.1 s on a fast core, short enough to run before and after.
STEPS = 200_000
#: Passes; the fastest is kept (the others include whatever else the machine was doing).
PASSES = 5


def reference_work(steps: int) -> int:
    """The reference workload: ``steps`` steps of formatting, hashing and arithmetic."""
    counts: dict[str, int] = {}
    for index in range(steps):
        key = f"tenant-{index % 200}"
        counts[key] = counts.get(key, 0) + (index & 7)
    return len(counts)


@dataclass(frozen=True)
class MachineSpeed:
    """One reading: the fastest pass's time per step, how it was taken, and on what machine."""

    step_micros: float
    steps: int
    passes: int
    cpu: str
    cores: int

    def describe(self, when: str) -> str:
        return (
            f"Machine speed {when}: {self.step_micros:.3f} µs per reference Python step "
            f"(best of {self.passes} × {self.steps:,}; lower is faster; "
            f"loadtest/machine_speed.py), "
            f"{self.cores} cores, {self.cpu}"
        )


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def measure(steps: int = STEPS, passes: int = PASSES) -> MachineSpeed:
    """Time ``passes`` passes of ``reference_work(steps)``; keep the fastest."""
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        reference_work(steps)
        best = min(best, time.perf_counter() - started)
    return MachineSpeed(best / steps * 1e6, steps, passes, cpu_model(), os.cpu_count() or 0)
