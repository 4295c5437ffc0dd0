"""Per-job timestamps of a worker's start path, for ``throughput_bench.py --start-trace DIR``.

Installed by ``throughput_app`` in every process of a benchmark worker (members and handler
processes) when ``START_TRACE_VARIABLE`` names a folder; otherwise nothing here runs. It wraps
a few of the worker's steps, records ``(stage, job id, wall-clock time)`` for each job that
passes, and appends them to ``<folder>/<pid>.bin`` every half second (``decode`` reads
them). Measurement only: the wrapping reaches into the worker's parts, which no tenantq code
may do.

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

import array
import os
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The folder the worker's processes write to (unset: no tracing).
START_TRACE_VARIABLE = "THROUGHPUT_START_TRACE"
FLUSH_SECONDS = 0.5

#: Stages in path order; a record names its stage by its index here.
STAGES = (
    "produced",
    "read",
    "routed",
    "submitted",
    "sent",
    "committed",
    "applied",
    "handed",
    "handler",
)
_STAGE_INDEX = {stage: index for index, stage in enumerate(STAGES)}
#: A record's head: stage index, time (0 when each job has its own), job count.
HEAD = struct.Struct("<BdI")

#: (stage, time or None, job ids, each job's time or None), turned into bytes by the
#: flushing thread: the traced steps only append a tuple (a few microseconds per job in
#: all, where formatting each job's line there cost the poll loop about ten).
_batches: list[tuple[str, float | None, list[uuid.UUID], list[float] | None]] = []
#: Recording (``<folder>/on`` exists), and when the poll loop last took messages.
_state = {"on": False, "read_at": 0.0}


def record(stage: str, job_ids: list[uuid.UUID], at: float | None = None) -> None:
    """``stage`` reached by each of ``job_ids`` at ``at`` (now when None)."""
    if _state["on"] and job_ids:
        _batches.append((stage, time.time() if at is None else at, job_ids, None))


def record_each(stage: str, job_ids: list[uuid.UUID], times: list[float]) -> None:
    """``stage`` reached by each of ``job_ids`` at its own time."""
    if _state["on"] and job_ids:
        _batches.append((stage, None, job_ids, times))


def encode(batch: tuple[str, float | None, list[uuid.UUID], list[float] | None]) -> bytes:
    stage, at, job_ids, times = batch
    parts = [HEAD.pack(_STAGE_INDEX[stage], at or 0.0, len(job_ids))]
    parts.extend(job_id.bytes for job_id in job_ids)
    if times is not None:
        parts.append(array.array("d", times).tobytes())
    return b"".join(parts)


def decode(data: bytes) -> Iterator[tuple[str, uuid.UUID, float]]:
    """(stage, job id, time) of each job in a file's bytes."""
    offset = 0
    while offset < len(data):
        index, at, count = HEAD.unpack_from(data, offset)
        offset += HEAD.size
        ids = [uuid.UUID(bytes=data[offset + 16 * i : offset + 16 * (i + 1)]) for i in range(count)]
        offset += 16 * count
        if at == 0.0:
            times = array.array("d", data[offset : offset + 8 * count]).tolist()
            offset += 8 * count
        else:
            times = [at] * count
        stage = STAGES[index]
        for job_id, when in zip(ids, times, strict=True):
            yield stage, job_id, when


def _flush_forever(path: Path) -> None:
    flag = path.parent / "on"
    while True:
        time.sleep(FLUSH_SECONDS)
        _state["on"] = flag.exists()
        # Appends only ever go to the end: the first len(taken) are the ones taken.
        taken = _batches[:]
        del _batches[: len(taken)]
        if taken:
            with path.open("ab") as file:
                file.write(b"".join(encode(batch) for batch in taken))


def install(folder: str) -> None:
    """Wrap the worker's steps (once per process) and start the flushing thread."""
    from tenantq.consumer import dispatch, intake, ledger, starts

    Path(folder).mkdir(parents=True, exist_ok=True)
    path = Path(folder) / f"{os.getpid()}.bin"
    threading.Thread(target=_flush_forever, args=(path,), daemon=True).start()

    take = intake.Intake.take

    def traced_take(self: Any, messages: Any, between: Any = None) -> None:
        _state["read_at"] = time.time()
        take(self, messages, between)

    intake.Intake.take = traced_take  # type: ignore[method-assign]

    finish = intake.Intake._finish

    def traced_finish(self: Any, routed: Any) -> None:
        if _state["on"] and routed.items:
            ids = [item.job_id for item in routed.items]
            times = [(item.timestamp_ms or 0) / 1000 for item in routed.items]
            record_each("produced", ids, times)
            record("read", ids, _state["read_at"])
            record("routed", ids)
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
    record("handler", [job_id])
