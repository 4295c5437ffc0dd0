"""Guarantee: a process the benchmarks start (a worker, a PgQueuer runner) ends when the
benchmark's process dies without cleaning up (a signal, a crash in a client library), rather
than running on in its own session and skewing the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LOADTEST = Path(__file__).resolve().parents[3] / "loadtest"

#: A stand-in for the benchmark: starts a long sleeper as the benchmarks start workers,
#: prints its pid, and waits to be killed.
BENCHMARK = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bench_run import start_process
child = start_process(
    [sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ), Path(sys.argv[2])
)
print(child.pid, flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (this container's init may never reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_started_process_ends_when_the_benchmark_is_killed(tmp_path: Path) -> None:
    benchmark = subprocess.Popen(
        [sys.executable, "-c", BENCHMARK, str(LOADTEST), str(tmp_path / "child.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = 0
    try:
        assert benchmark.stdout is not None
        child = int(benchmark.stdout.readline())
        # The launcher has become the command: the same pid, now the sleeper.
        deadline = time.monotonic() + 10
        while "time.sleep(120)" not in Path(f"/proc/{child}/cmdline").read_bytes().decode():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        assert _running(child)
        benchmark.kill()  # SIGKILL: no cleanup of the benchmark's runs
        benchmark.wait(10)
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child), "the started process outlived the benchmark"
    finally:
        benchmark.kill()
        if child and _running(child):
            os.kill(child, signal.SIGKILL)
