"""The handler process: where a ``tenantq worker`` runs user code, apart from its Kafka
consumer and its database connections.

A handler that kills its process (``os._exit``, a segfault, the OOM killer) takes this process
down, never the group member: the member keeps its partitions, starts a new handler process
and runs the other jobs again under their leases (``tenantq.consumer.executor``). To say which
job did it, this process leaves a note behind before it dies:

* ``exit``: ``os._exit`` is wrapped; it writes the id of the job that called it, then exits.
* ``fault``: Python's ``faulthandler`` writes the crashing thread's id on a fatal signal, and
  ``threads`` (a small memory-mapped table) says which job each thread was running.

A SIGKILL leaves no note: then nobody knows, and every job that was running counts the crash.

Messages (pickled, in batches) from the member: ``("run", [TaskSpec, ...])``,
``("cancel", job_id, reason)``, ``("stop",)``. To the member: ``[TaskOutcome, ...]``, with
a start note ``(job_id, started, deadline)`` (monotonic times: one clock on the host) before
the outcome of each task the member sent beyond the free slots (its timeout runs from its
start). A task the member timed out frees its slot here: a hung handler's thread is left
behind. Both
travel as plain tuples, and a job id as its 16 bytes: pickling a dataclass or a ``UUID``
costs several times a tuple's, per job. When the
member's end of the pipe closes (the member died), this process exits at once: its results
could not be written anyway, and the member's replacement runs the jobs again.
"""

from __future__ import annotations

import contextvars
import faulthandler
import logging
import mmap
import os
import pickle
import queue
import signal
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from tenantq.consumer.attempt_trace import Origin, attempt_span
from tenantq.consumer.collector import settle_collector
from tenantq.consumer.context import JobContext
from tenantq.consumer.lease_calls import LeaseCalls
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.job_ids import uuid_of_int
from tenantq.observability import tracing
from tenantq.settings import Settings
from tenantq.states import Outcome

if TYPE_CHECKING:  # opened on first use in the handler process
    from tenantq.errors import DatabaseUnavailable
    from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")

EXIT_NOTE = "exit"
FAULT_NOTE = "fault"
THREAD_TABLE = "threads"
#: One row of the thread table: thread ident (8 bytes) and job id (16 bytes).
THREAD_ROW = struct.Struct("<Q16s")
#: How long the result sender gathers finished tasks into one message.
SEND_GATHER_SECONDS = 0.0005
#: Fields of a start note, which the member tells from a ``TaskOutcome`` by their count.
START_NOTE_FIELDS = 3


@dataclass(frozen=True, slots=True)
class HandlerProcessSpec:
    """What a handler process needs to start (sent once, pickled): the same for every
    handler process of a worker, each of which gets a notes folder of its own beside it."""

    app_reference: str
    slots: int
    #: Pickled as they are (through the pipe, never on a command line: they hold secrets).
    settings: Settings
    worker_id: str
    policy: RetryPolicy
    log_level: str


class TaskSpec(NamedTuple):
    """One attempt to run, as the member sends it."""

    job_id: bytes
    job_type: str
    queue: str
    tenant: str
    payload: bytes
    attempt: int
    max_attempts: int
    timeout: float
    progress: Any
    replays: int
    idempotency_key: str | None
    #: Where the attempt comes from, for its span; None when the member does not trace.
    trace: Origin | None = None
    #: Sent beyond the free slots: it may wait for one, and its start is reported.
    waits: bool = False


class TaskOutcome(NamedTuple):
    """How one attempt ended, judged here (the member applies it as it is)."""

    job_id: bytes
    outcome: str
    state: str
    error_class: str | None
    error_message: str | None
    delay_seconds: float | None
    give_back: bool
    delay_reason: str | None
    breaker: str
    duration: float


_current_job: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar(
    "tenantq_current_job", default=None
)


class _ThreadTable:
    """Which job each handler thread runs, in a file the member reads after a crash."""

    def __init__(self, path: Path, rows: int) -> None:
        self._rows = rows
        with open(path, "wb") as file:
            file.truncate(THREAD_ROW.size * rows)
        self._file = open(path, "r+b")  # noqa: SIM115 - lives as long as the process
        self._map = mmap.mmap(self._file.fileno(), THREAD_ROW.size * rows)
        self._local = threading.local()
        self._next = 0
        self._lock = threading.Lock()

    def running(self, job_id: uuid.UUID | None) -> None:
        row = getattr(self._local, "row", None)
        if row is None:
            with self._lock:
                row = self._local.row = self._next % self._rows
                self._next += 1
        job = job_id.bytes if job_id is not None else bytes(16)
        THREAD_ROW.pack_into(self._map, row * THREAD_ROW.size, threading.get_ident(), job)


def read_notes(folder: Path) -> uuid.UUID | None:
    """After a handler process died: the job that killed it, when it left a note."""
    try:
        text = (folder / EXIT_NOTE).read_text().strip()
        if text:
            return uuid.UUID(text.splitlines()[-1])
    except (OSError, ValueError):
        pass
    try:
        fault = (folder / FAULT_NOTE).read_text(errors="replace")
        table = (folder / THREAD_TABLE).read_bytes()
    except OSError:
        return None
    for line in fault.splitlines():
        # faulthandler: "Current thread 0x00007f... (most recent call first):"
        if line.startswith(("Current thread 0x", "Thread 0x")) and "most recent" in line:
            ident = int(line.split()[2 if line.startswith("Current") else 1], 16)
            if line.startswith("Current"):
                for offset in range(0, len(table) - THREAD_ROW.size + 1, THREAD_ROW.size):
                    thread, job = THREAD_ROW.unpack_from(table, offset)
                    if thread == ident and any(job):
                        return uuid.UUID(bytes=job)
                return None
    return None


def _leave_notes(folder: Path) -> None:
    exit_note = os.open(folder / EXIT_NOTE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    fault_note = os.open(folder / FAULT_NOTE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    faulthandler.enable(file=fault_note, all_threads=True)
    real_exit = os._exit

    def exit_with_note(code: int) -> None:  # type: ignore[misc]
        job = _current_job.get()
        if job is not None:
            os.write(exit_note, f"{job}\n".encode())
        real_exit(code)

    os._exit = exit_with_note  # type: ignore[assignment]


def main(connection: Any, spec: HandlerProcessSpec, notes: str) -> None:
    """Entry point of a handler process (multiprocessing's spawn); it leaves its notes in
    the folder ``notes`` (``read_notes``)."""
    # The member decides when to stop and says so through the pipe; a Ctrl-C sent to the
    # whole process group must not kill the jobs it is still draining.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from tenantq.app import load_app
    from tenantq.log import configure_logging

    configure_logging(spec.log_level)
    settings = spec.settings
    app = load_app(spec.app_reference)
    _trace_from_environment()
    folder = Path(notes)
    table = _ThreadTable(folder / THREAD_TABLE, rows=4 * spec.slots + 64)
    _leave_notes(folder)
    leases, lease_store = _child_leases(settings, spec.worker_id)
    settle_collector()
    finished: queue.SimpleQueue[Task | tuple[bytes, float, float] | None] = queue.SimpleQueue()
    #: By job id bytes, as the member names them.
    tasks_by_id: dict[bytes, Task] = {}
    #: Tasks sent beyond the free slots that have not started: (job id bytes, task, timeout).
    waiting: dict[uuid.UUID, tuple[bytes, Task, float]] = {}

    def running(job_id: uuid.UUID | None) -> None:
        _current_job.set(job_id)
        table.running(job_id)
        if job_id is not None and waiting:
            entry = waiting.pop(job_id, None)
            if entry is not None:
                raw, task, timeout = entry
                now = time.monotonic()
                task.started = now
                task.deadline = task.context.deadline = now + timeout
                finished.put((raw, now, task.deadline))

    def done(task: Task) -> None:
        tasks_by_id.pop(task.item, None)
        finished.put(task)

    runner = HandlerRunner(spec.slots, done, spec.policy, on_start=running)
    send_lock = threading.Lock()
    sender = threading.Thread(
        target=_send_results, args=(connection, finished, send_lock), name="tenantq-results"
    )
    sender.start()
    try:
        while True:
            try:
                message = pickle.loads(connection.recv_bytes())
            except (EOFError, OSError):
                tracing.flush()
                os._exit(0)  # the member is gone: nobody would take the results
            kind = message[0]
            if kind == "run":
                tasks = []
                for row in message[1]:
                    task_spec = TaskSpec._make(row)
                    task = _task(app, task_spec, leases)
                    tasks_by_id[task_spec.job_id] = task
                    if task_spec.waits:
                        waiting[task.context.job_id] = (task_spec.job_id, task, task_spec.timeout)
                    tasks.append(task)
                runner.submit_many(tasks)
            elif kind == "cancel":
                asked = tasks_by_id.get(message[1])
                if asked is not None:
                    _cancel(asked, message[2])
                    # One still waiting for a slot never starts (the runner ends it when its
                    # turn comes, unstarted): no start note for it.
                    waiting.pop(asked.context.job_id, None)
                    if message[2] == "timeout":
                        # The member gave up on it: its slot serves the next job (a hung
                        # handler's thread is left behind).
                        tasks_by_id.pop(message[1], None)
                        runner.abandon(asked)
            elif kind == "stop":
                break
    finally:
        runner.stop(timeout=1.0)
        finished.put(None)
        sender.join(5)
        lease_store.close()
        tracing.shutdown()


def _trace_from_environment() -> None:
    """The SDK as ``tenantq worker`` sets it up in the member (the same ``OTEL_*``
    variables), so attempts that run here have their spans."""
    try:
        tracing.configure_from_environment()
    except tracing.TracingUnavailable as error:
        log.warning("tracing is off in the handler process: %s", error)


def _cancel(task: Task, reason: str) -> None:
    """The member asks ``task`` to stop. A timeout is the member's verdict already (it
    gave up on the attempt and applied it): the span ends so at once, whatever the handler
    does next."""
    task.context.signal_cancel(reason)
    if reason == "timeout" and task.trace is not None:
        task.trace.end(
            Outcome.TIMEOUT.value,
            error_class="Timeout",
            error_message="handler did not finish before its timeout",
        )


def _task(app: Any, spec: TaskSpec, leases: LeaseCalls) -> Task:
    """The attempt ``spec`` describes. Its ``item`` is the job id's bytes, as the member
    names the job. Made once per job, by position, in the order of the fields (a call by
    keyword costs twice as much)."""
    job_type = app.job_type(spec.job_type)
    raw_id = spec.job_id
    job_id = uuid_of_int(int.from_bytes(raw_id, "big"))  # uuid.UUID(bytes=...), a third the cost
    deadline = time.monotonic() + spec.timeout
    context = JobContext(
        job_id,
        spec.queue,
        spec.job_type,
        spec.tenant,
        spec.attempt,
        spec.max_attempts,
        deadline,
        spec.progress,
        spec.replays,
        spec.idempotency_key,
        None,  # _cancel: made when a handler first waits for it
        None,  # _cancel_reason
        None,  # _cancelled_at
        leases,
    )
    task = Task(job_type, spec.payload, context, deadline, raw_id)
    if spec.trace is not None:
        tracer = tracing.job_tracer()
        if tracer is not None:
            task.trace = attempt_span(tracer, context, spec.trace)
    return task


def _send_results(
    connection: Any,
    finished: queue.SimpleQueue[Task | tuple[bytes, float, float] | None],
    lock: threading.Lock,
) -> None:
    while True:
        first = finished.get()
        if first is None:
            return
        batch: list[Task | tuple[bytes, float, float]] = [first]
        time.sleep(SEND_GATHER_SECONDS)
        stop = False
        while True:
            try:
                task = finished.get_nowait()
            except queue.Empty:
                break
            if task is None:
                stop = True
                break
            batch.append(task)
        # A start note travels as it is; a finished task as its outcome.
        outcomes = [task if isinstance(task, tuple) else _outcome(task) for task in batch]
        try:
            with lock:
                connection.send_bytes(pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            os._exit(0)  # the member is gone
        if stop:
            return


def _outcome(task: Task) -> tuple[Any, ...]:
    """The ``TaskOutcome`` of a finished task, as the plain tuple that travels (its fields in
    order: made once per job, and a named tuple by keyword costs five times as much)."""
    verdict = task.verdict
    assert verdict is not None
    return (
        task.item,  # the job id's bytes
        verdict.outcome.value,
        verdict.state.value,
        verdict.error_class,
        verdict.error_message,
        verdict.delay_seconds,
        verdict.give_back,
        verdict.delay_reason.value if verdict.delay_reason else None,
        task.breaker,
        task.duration,
    )


def _child_leases(settings: Any, worker_id: str) -> tuple[LeaseCalls, JobStore]:
    """``ctx.heartbeat()`` and ``ctx.checkpoint()`` from a handler process, and the store to
    close at the end: its own connection (opened on first use), fenced by the worker's id
    like the member's."""
    from tenantq.store.job_store import JobStore as Store

    store = Store.open(settings, worker_id, role="handlers")

    def unreachable(call: str, error: DatabaseUnavailable) -> None:
        # The caller's answer says what it means (not known lost; not saved).
        log.warning("%s: database unreachable (%s)", call, error)

    calls = LeaseCalls(
        store, threading.Lock(), settings.worker.lease_seconds, unreachable=unreachable
    )
    return calls, store
