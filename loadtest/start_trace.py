"""Per-job timestamps of a worker's start path, for ``throughput_bench.py --start-trace DIR``.

Installed by ``throughput_app`` in every process of a benchmark worker (members and handler
processes) when ``START_TRACE_VARIABLE`` names a folder; otherwise nothing here runs. It wraps
a few of the worker's steps, records ``(stage, job id, wall-clock time)`` for each job that
passes, and appends them to ``<folder>/<pid>.csv`` every half second. Measurement only: the
wrapping reaches into the worker's parts, which no tenantq code may do.

Only while ``<folder>/on`` exists (the benchmark makes it for the latency phase; checked
every half second): the backlog before it is not traced, so the wrapping costs it nothing but
a test of a flag per step.

| stage      | when                                                                    |
| ---------- | ----------------------------------------------------------------------- |
| produced   | the record's Kafka timestamp (the producer's ``produce`` call, in ms)   |
| read       | the poll loop has the message from the consumer (``Intake.take``)       |
| routed     | the poll thread has decoded it and queued it for dispatch               |
| submitted  | dispatch chose it and handed its claim to the claims lane               |
| sent       | the claims lane's thread begins running that claim                      |
| committed  | the claim statement returned (committed: the lane runs autocommit)      |
| applied    | the poll thread applies the claim's answer (``Dispatch.claimed``)       |
| handed     | the starter hands its task to the executor                              |
| handler    | the handler runs (in a thread of the member, or the handler process)    |
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

#: The folder the worker's processes write to (unset: no tracing).
START_TRACE_VARIABLE = "THROUGHPUT_START_TRACE"
FLUSH_SECONDS = 0.5

_lines: list[str] = []
_lock = threading.Lock()
#: Recording (``<folder>/on`` exists), and when the poll loop last took messages.
_state = {"on": False, "read_at": 0.0}


def record(stage: str, job_ids: Any, at: float | None = None) -> None:
    """``stage`` reached by each of ``job_ids`` at ``at`` (now when None)."""
    if not _state["on"]:
        return
    now = time.time() if at is None else at
    text = f",{now:.6f}\n"
    batch = [f"{stage},{job_id}{text}" for job_id in job_ids]
    with _lock:
        _lines.extend(batch)


def _flush_forever(path: Path) -> None:
    flag = path.parent / "on"
    while True:
        time.sleep(FLUSH_SECONDS)
        _state["on"] = flag.exists()
        with _lock:
            taken = _lines[:]
            _lines.clear()
        if taken:
            with path.open("a") as file:
                file.writelines(taken)


def install(folder: str) -> None:
    """Wrap the worker's steps (once per process) and start the flushing thread."""
    from tenantq.consumer import dispatch, intake, ledger, starts

    Path(folder).mkdir(parents=True, exist_ok=True)
    path = Path(folder) / f"{os.getpid()}.csv"
    threading.Thread(target=_flush_forever, args=(path,), daemon=True).start()

    take = intake.Intake.take

    def traced_take(self: Any, messages: Any, between: Any = None) -> None:
        _state["read_at"] = time.time()
        take(self, messages, between)

    intake.Intake.take = traced_take  # type: ignore[method-assign]

    finish = intake.Intake._finish

    def traced_finish(self: Any, routed: Any) -> None:
        if _state["on"] and routed.items:
            for item in routed.items:
                record("produced", (item.job_id,), (item.timestamp_ms or 0) / 1000)
            record("read", [item.job_id for item in routed.items], _state["read_at"])
            record("routed", [item.job_id for item in routed.items])
        finish(self, routed)

    intake.Intake._finish = traced_finish  # type: ignore[method-assign]

    claim = dispatch.Claims.claim

    def traced_claim(self: Any, items: Any) -> None:
        record("submitted", [item.job_id for item in items])
        claim(self, items)

    dispatch.Claims.claim = traced_claim  # type: ignore[method-assign]

    execute = ledger.Lane._execute

    def traced_execute(self: Any, operation: Any, *rest: Any) -> None:
        if not isinstance(operation, ledger.Claim):
            execute(self, operation, *rest)
            return
        ids = [row.job_id for row in operation.rows]
        record("sent", ids)
        execute(self, operation, *rest)
        record("committed", ids)

    ledger.Lane._execute = traced_execute  # type: ignore[method-assign]

    claimed = dispatch.Dispatch.claimed

    def traced_claimed(self: Any, operation: Any) -> None:
        record("applied", [item.job_id for item in operation.context])
        claimed(self, operation)

    dispatch.Dispatch.claimed = traced_claimed  # type: ignore[method-assign]

    submit = starts.Starter._submit

    def traced_submit(self: Any, tasks: Any, started: Any) -> None:
        record("handed", [task.item.job_id for task in tasks])
        submit(self, tasks, started)

    starts.Starter._submit = traced_submit  # type: ignore[method-assign]


def handler_started(job_id: uuid.UUID) -> None:
    """Called by the traced no-op handler as it runs."""
    record("handler", (job_id,))
