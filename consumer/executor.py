"""Where a worker runs handlers: in its own threads, or in a handler process it supervises.

``tenantq worker MODULE:APP`` runs them in a **handler process** (``ProcessExecutor``): the
member process keeps the Kafka consumer, the leases and the database, and never runs user
code, so a handler that kills its process (``os._exit``, a segfault, the OOM killer) costs a
new handler process — about a second — never the member, its partitions or a rebalance. The
jobs that were running in the dead process are handed to ``on_crash`` with the job that
killed it when it left a note (``tenantq.consumer.handler_process``); the worker runs the
others again under the same lease.

A worker made without an app reference runs handlers in its own threads (``ThreadExecutor``):
what tests and embedded uses want, with the same judging of outcomes.

Both hand finished attempts, judged (``Task.verdict``), to ``on_finished`` from their own
threads; everything else is called by the poll thread (``cancel`` also by the heartbeat).
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tenantq.consumer.attempt_trace import origin_of, trace_attempts, trace_crashed
from tenantq.consumer.handler_process import (
    START_NOTE_FIELDS,
    HandlerProcessSpec,
    read_notes,
)
from tenantq.consumer.handler_process import main as handler_process_main
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.headers import DelayReason
from tenantq.observability.tracing import JobTracer, job_tracer
from tenantq.settings import Settings
from tenantq.states import JobState, Outcome

log = logging.getLogger("tenantq.worker")

#: (running tasks, the task that killed the process or None, one line saying how it died).
CrashHandler = Callable[[list[Task], Task | None, str], None]
#: A handler process that dies this young with nothing running is started again after a
#: growing delay.
YOUNG_DEATH_SECONDS = 5.0


class Executor(Protocol):
    """What the worker needs of a place to run handlers."""

    @property
    def busy(self) -> int: ...

    @property
    def queues_ahead(self) -> bool:
        """Takes leased jobs beyond its free slots, to start each the moment a slot frees."""
        ...

    def start(self) -> None: ...

    def submit(self, tasks: Sequence[Task]) -> None: ...

    def cancel(self, task: Task, reason: str) -> None: ...

    def expire(self) -> list[Task]: ...

    def abandon(self, task: Task) -> bool: ...

    def running(self) -> list[Task]: ...

    def stop(self, timeout: float) -> None: ...


class ThreadExecutor:
    """Handlers in threads of the worker's own process."""

    def __init__(
        self, slots: int, on_finished: Callable[[Task], None], policy: RetryPolicy
    ) -> None:
        self._runner = HandlerRunner(slots, on_finished, policy)

    @property
    def busy(self) -> int:
        return self._runner.busy

    #: A slot that frees takes its next job from the poll thread's ready queue at once.
    queues_ahead = False

    def start(self) -> None:
        pass

    def submit(self, tasks: Sequence[Task]) -> None:
        trace_attempts(tasks)
        self._runner.submit_many(tasks)

    def cancel(self, task: Task, reason: str) -> None:
        task.context.signal_cancel(reason)

    def expire(self) -> list[Task]:
        return self._runner.expire()

    def abandon(self, task: Task) -> bool:
        return self._runner.abandon(task)

    def running(self) -> list[Task]:
        return self._runner.running()

    def stop(self, timeout: float) -> None:
        self._runner.stop(timeout=timeout)


class ProcessExecutor:
    """Handlers in a handler process, started again at once when it dies.

    Jobs claimed ahead go to the handler process before a slot frees (as many as its slots
    end in a short while at the recent rate, ``tenantq.consumer.starts``): it runs at most
    ``slots`` at once and starts the next the moment a handler returns, so a slot does not wait
    for a round trip through the pipe and the member's poll loop between two short jobs. A job
    sent beyond the free slots (the member's count, which is never below the handler process's
    own) waits there; its timeout runs from its start, which the handler process reports beside
    the results, and a cancel (revoke, shutdown, operator) before its start means it never
    starts. Until then its deadline is a bound: the
    latest deadline of the jobs sent before it plus its own timeout (a handler given up on
    frees its slot in the handler process, so a job waits no longer than that even behind hung
    handlers, and a handler process that stops answering still has its jobs timed out).
    """

    #: Leased jobs go to the handler process ahead of free slots; it starts them as slots free.
    queues_ahead = True

    def __init__(
        self,
        spec: HandlerProcessSpec,
        *,
        on_finished: Callable[[list[Task]], None],
        on_crash: CrashHandler,
    ) -> None:
        #: What every handler process it starts is started with (its slots, its retry policy).
        self._spec = spec
        self._on_finished = on_finished
        self._on_crash = on_crash
        self._lock = threading.Lock()
        #: Attempts handed to the handler process and not finished, by job id bytes (as the
        #: handler process names them): under the lock.
        self._running: dict[bytes, Task] = {}
        self._stopping = False
        #: The live handler process; None while a new one waits to start (under the lock).
        self._process: _HandlerProcess | None = None
        #: Messages for the next handler process, while there is none (under the lock).
        self._backlog: list[tuple[Any, ...]] = []
        #: No running task's deadline is earlier (under the lock; may be early, never late).
        self._next_deadline = float("inf")
        #: No running task's deadline is later (under the lock; may be late, never early).
        self._last_deadline = 0.0
        #: Wait before starting a handler process again after one that died young.
        self._restart_delay = 0.0
        self.restarts = 0

    @property
    def busy(self) -> int:
        return len(self._running)

    def start(self) -> None:
        self._process = self._spawn()

    def submit(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            return
        started = time.monotonic()  # handed over together
        tracer = job_tracer()
        with self._lock:
            specs = []
            running = self._running
            if not running:
                self._last_deadline = 0.0
            # Beyond these, a task waits in the handler process for a slot.
            free = self._spec.slots - len(running)
            for task in tasks:
                task.started = started
                waits = free <= 0
                spec = _spec(task, tracer, waits=waits)
                free -= 1
                if waits:
                    # It starts by the time the jobs before it have ended or timed out.
                    task.deadline += max(0.0, self._last_deadline - started)
                running[spec[0]] = task
                if task.deadline < self._next_deadline:
                    self._next_deadline = task.deadline
                if task.deadline > self._last_deadline:
                    self._last_deadline = task.deadline
                specs.append(spec)
            self._send(("run", specs))

    def cancel(self, task: Task, reason: str) -> None:
        task.context.signal_cancel(reason)
        with self._lock:
            self._send(("cancel", task.context.job_id.bytes, reason))

    def _send(self, message: tuple[Any, ...]) -> None:
        """Under the lock: to the handler process, or kept for the next one."""
        if self._process is not None:
            self._process.send(message)
        elif message[0] == "run":
            self._backlog.append(message)

    def expire(self) -> list[Task]:
        """Attempts past their deadline: given up on here (judged as timed out); the handler
        process is told to cancel them, and whatever it says later is dropped."""
        now = time.monotonic()
        if now < self._next_deadline:
            return []  # asked every loop turn: look at every task only when one may be due
        with self._lock:
            expired = [task for task in self._running.values() if task.deadline <= now]
            for task in expired:
                del self._running[task.context.job_id.bytes]
            self._next_deadline = min(
                (task.deadline for task in self._running.values()), default=float("inf")
            )
        for task in expired:
            self.cancel(task, "timeout")
            task.finished = now
            task.timed_out = True
            task.judge(self._spec.policy)
        if expired:
            self._on_finished(expired)
        return expired

    def abandon(self, task: Task) -> bool:
        with self._lock:
            return self._running.pop(task.context.job_id.bytes, None) is not None

    def running(self) -> list[Task]:
        with self._lock:
            return list(self._running.values())

    def stop(self, timeout: float) -> None:
        self._stopping = True
        process = self._process
        if process is not None:
            process.stop(timeout)

    # -- the handler process ------------------------------------------------------------------

    def _spawn(self) -> _HandlerProcess:
        return _HandlerProcess(self._spec, self._received, self._died)

    def _received(self, rows: list[tuple[Any, ...]]) -> None:
        finished = []
        with self._lock:
            running = self._running
            for row in rows:
                if len(row) == START_NOTE_FIELDS:
                    # A task that waited for a slot started: its timeout runs from then.
                    task = running.get(row[0])
                    if task is not None:
                        task.started, task.deadline = row[1], row[2]
                        if task.deadline < self._next_deadline:
                            self._next_deadline = task.deadline
                    continue
                task = running.pop(row[0], None)  # by the job id's bytes, TaskOutcome's first
                if task is not None:  # else: timed out or abandoned here already
                    finished.append((task, row))
        succeeded = Verdict.succeeded()
        tasks = []
        for task, row in finished:
            # TaskOutcome's fields, unpacked: once per job.
            (
                _, outcome, state, error_class, error_message, delay_seconds, give_back,
                delay_reason, breaker, duration,
            ) = row  # fmt: skip
            task.finished = task.started + duration
            if outcome == succeeded.outcome and state == succeeded.state:
                task.verdict = succeeded
            else:
                task.verdict = Verdict(
                    Outcome(outcome),
                    JobState(state),
                    error_class,
                    error_message,
                    delay_seconds,
                    give_back,
                    DelayReason(delay_reason) if delay_reason else None,
                )
            task.breaker = breaker
            tasks.append(task)
        if tasks:
            # One hand-over for the batch: the poll thread takes it in one piece.
            self._on_finished(tasks)

    def _died(self, handler_process: _HandlerProcess, how: str) -> None:
        """The receiver thread saw the handler process go: start another, then report the
        attempts that were running in it."""
        culprit_id = read_notes(handler_process.notes)
        handler_process.forget()
        lived = time.monotonic() - handler_process.started
        with self._lock:
            crashed = list(self._running.values())
            self._running.clear()
            if self._stopping:
                return
            self._process = None
            # A process that dies young (say the app cannot be imported) is started again
            # ever more slowly, not in a hot loop.
            young = lived < YOUNG_DEATH_SECONDS and not crashed
            self._restart_delay = min(self._restart_delay * 2 or 0.5, 30.0) if young else 0.0
        log.warning(
            "handler process %s %s with %d job(s) running%s; starting another%s",
            handler_process.pid,
            how,
            len(crashed),
            f" (job {culprit_id} did it)" if culprit_id else "",
            f" in {self._restart_delay:.1f}s" if self._restart_delay else "",
        )
        culprit = next((t for t in crashed if t.context.job_id == culprit_id), None)
        trace_crashed(crashed, f"the handler process {how}")
        self._on_crash(crashed, culprit, f"the handler process {how}")
        if self._restart_delay:
            time.sleep(self._restart_delay)
        with self._lock:
            if self._stopping:
                return
            self._process = self._spawn()
            self.restarts += 1
            backlog, self._backlog = self._backlog, []
            for message in backlog:
                self._process.send(message)


class _HandlerProcess:
    """One handler process, the thread that sends it batches and the one that reads back."""

    def __init__(
        self,
        spec: HandlerProcessSpec,
        on_outcomes: Callable[[list[tuple[Any, ...]]], None],
        on_death: Callable[[_HandlerProcess, str], None],
    ) -> None:
        #: Where the process leaves its notes (``read_notes``): made here, removed by ``forget``.
        self.notes = Path(tempfile.mkdtemp(prefix="tenantq-handlers-"))
        self.started = time.monotonic()
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe(duplex=True)
        self._process = context.Process(
            target=handler_process_main,
            args=(child_end, spec, str(self.notes)),
            name="tenantq-handlers",
            daemon=True,
        )
        self._process.start()
        child_end.close()
        self.pid = self._process.pid
        self._on_outcomes = on_outcomes
        self._on_death = on_death
        self._outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._stopping = False
        threading.Thread(target=self._send_loop, name="tenantq-handlers-send", daemon=True).start()
        threading.Thread(
            target=self._receive_loop, name="tenantq-handlers-recv", daemon=True
        ).start()

    def send(self, message: tuple[Any, ...]) -> None:
        self._outbox.put(message)

    def stop(self, timeout: float) -> None:
        """Ask the process to finish (it stops taking work and exits); kill it past
        ``timeout``."""
        self._stopping = True
        self._outbox.put(("stop",))
        self._outbox.put(None)
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self.forget()

    def forget(self) -> None:
        shutil.rmtree(self.notes, ignore_errors=True)

    def _send_loop(self) -> None:
        while True:
            message = self._outbox.get()
            if message is None:
                return
            # Gather what is queued already into one write: a dispatch round's tasks and the
            # cancels beside them cost one pickle and one system call.
            batch = [message]
            while True:
                try:
                    extra = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if extra is None:
                    self._outbox.put(None)
                    break
                batch.append(extra)
            try:
                for item in _coalesce(batch):
                    self._connection.send_bytes(pickle.dumps(item, pickle.HIGHEST_PROTOCOL))
            except OSError:
                return  # the process is gone; the receiver reports it

    def _receive_loop(self) -> None:
        while True:
            try:
                data = self._connection.recv_bytes()
            except (EOFError, OSError):
                break
            self._on_outcomes(pickle.loads(data))
        self._process.join(10)
        code = self._process.exitcode
        self._connection.close()
        if self._stopping:
            return
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        self._on_death(self, how)


def executor_for(
    app_reference: str | None,
    slots: int,
    settings: Settings,
    worker_id: str,
    policy: RetryPolicy,
    inbox: Inbox,
) -> Executor:
    """A handler process when the worker knows the app's reference and the settings allow it
    (``worker.handler_process``), threads otherwise; either hands what ends to ``inbox``."""
    if app_reference is not None and settings.worker.handler_process:
        spec = HandlerProcessSpec(
            app_reference, slots, settings, worker_id, policy, settings.log_level
        )
        return ProcessExecutor(
            spec,
            on_finished=inbox.attempts_finished,
            on_crash=inbox.crashed,
        )
    return ThreadExecutor(slots, inbox.attempt_finished, policy)


def _coalesce(batch: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Adjacent ``run`` messages become one."""
    merged: list[tuple[Any, ...]] = []
    for message in batch:
        if message[0] == "run" and merged and merged[-1][0] == "run":
            merged[-1] = ("run", merged[-1][1] + message[1])
        else:
            merged.append(message)
    return merged


def _spec(task: Task, tracer: JobTracer | None = None, *, waits: bool = False) -> tuple[Any, ...]:
    """The ``TaskSpec`` of ``task`` as the plain tuple that travels (the job id first); with
    a ``tracer``, what the handler process needs for the attempt's span; ``waits``: sent
    beyond the free slots, so the handler process reports when it starts."""
    context = task.context
    return (
        context.job_id.bytes,
        context.job_type,
        context.queue,
        context.tenant,
        task.payload,
        context.attempt,
        context.max_attempts,
        max(0.0, task.deadline - time.monotonic()),
        context.progress,
        context.replays,
        context.idempotency_key,
        None if tracer is None else origin_of(task.item, tracer),
        waits,
    )
