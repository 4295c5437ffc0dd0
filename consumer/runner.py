"""Running handlers off the poll thread, with hard timeouts enforced from outside.

Sync handlers run on a set of handler threads; async handlers on one event-loop thread. An
attempt that ends is judged here (``tenantq.consumer.outcomes.classify``: its verdict and what
it says about its dependencies) before it is handed over. A handler that overruns its timeout
is given up on: its context is cancelled, its result posted as a timeout, and (for a sync
handler, whose thread cannot be killed) a replacement thread is started so capacity does not
leak. Whatever the abandoned handler returns later is dropped; the store would refuse it
anyway, since the attempt is fenced.

The runner serves the worker's own process (a worker without a handler process) and the
handler process (``tenantq.consumer.handler_process``) alike.
"""

from __future__ import annotations

import asyncio
import collections
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenantq.app import Handler, JobType
from tenantq.consumer.context import JobContext
from tenantq.consumer.outcomes import BreakerSignal, Verdict, breaker_signal, classify
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.errors import JobCanceled, PayloadValidationError
from tenantq.observability.tracing import AttemptSpan
from tenantq.states import Outcome
from tenantq.store.transient import (
    TRANSIENT_RETRIES,
    backoff_seconds,
    is_transient_database_error,
)


@dataclass(eq=False, slots=True)
class Task:
    """One attempt being run."""

    job_type: JobType
    payload: bytes
    context: JobContext
    deadline: float
    item: Any = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    error: BaseException | None = None
    timed_out: bool = False
    #: Set when the attempt ends: what becomes of the job, and what it says of dependencies.
    verdict: Verdict | None = None
    breaker: BreakerSignal = "neutral"
    #: The attempt's span when the process traces (``tenantq.consumer.attempt_trace``).
    trace: AttemptSpan | None = None
    #: The asyncio task of an async handler's attempt (made and cancelled in the loop's thread).
    _future: asyncio.Task[None] | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def duration(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def judge(self, policy: RetryPolicy) -> None:
        """Decide the verdict of the attempt that just ended (error, timeout and cancel are
        set)."""
        if self.error is None and not self.timed_out and self.context.cancel_reason is None:
            # The handler returned, nobody asked it to stop: what ``classify`` and
            # ``breaker_signal`` say of it, without their calls (0.6 us, once per job).
            self.verdict = Verdict.succeeded()
            self.breaker = "success"
            return
        self.verdict = classify(
            self.error,
            job_type=self.job_type,
            attempt=self.context.attempt,
            max_attempts=self.context.max_attempts,
            policy=policy,
            cancel_reason=self.effective_cancel_reason(),
            timed_out=self.timed_out,
        )
        self.breaker = breaker_signal(self.error, self.timed_out)

    def end_trace(self) -> None:
        """End the attempt's span (if traced) with its verdict."""
        trace, verdict = self.trace, self.verdict
        if trace is None or verdict is None:
            return
        trace.end(
            verdict.outcome.value,
            error_class=verdict.error_class,
            error_message=verdict.error_message,
            error=self.error,
            delay_seconds=verdict.delay_seconds,
        )

    def effective_cancel_reason(self) -> str | None:
        """An operator's cancel counts only if it came before the handler returned."""
        context = self.context
        reason = context.cancel_reason
        if reason is None:
            return None
        if self.error is None and context.cancelled_at is not None and self.finished is not None:
            if context.cancelled_at > self.finished:
                return None
        return reason


def decode_payload(job_type: JobType, payload: bytes) -> Any:
    """The handler's payload object: the job type's model, or plain JSON."""
    if job_type.model is not None:
        try:
            return job_type.model.model_validate_json(payload)
        except Exception as error:  # pydantic.ValidationError, bad JSON
            raise PayloadValidationError(
                f"payload of {job_type.name!r} does not fit its model: {error}"
            ) from None
    try:
        return loads_json(payload)
    except ValueError as error:
        raise PayloadValidationError(f"payload of {job_type.name!r} is not JSON: {error}") from None


#: The scanner of a decoder with ``json.loads``'s defaults (the C one where it is built;
#: typeshed does not declare the attribute).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads_json(payload: bytes) -> Any:
    """``json.loads(payload)``, same result and same errors, with the common shape read by
    the decoder's C scanner directly: an object whose first two bytes say UTF-8 (what
    ``json.detect_encoding`` would conclude) and that ends the text. ``json.loads`` of bytes
    spends most of its 1.1 us on that detection and on two whitespace matches; this takes
    0.25 us. Anything else (leading or trailing whitespace, another encoding, bad JSON) goes
    to ``json.loads`` itself."""
    if payload[:1] == b"{" and payload[1:2] != b"\x00":
        try:
            text = payload.decode("utf-8", "surrogatepass")
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return value
    return json.loads(payload)


class HandlerRunner:
    """Runs tasks; finished ones are judged and handed to ``on_finished`` (from any thread)."""

    def __init__(
        self,
        slots: int,
        on_finished: Callable[[Task], None],
        policy: RetryPolicy | None = None,
        *,
        on_start: Callable[[uuid.UUID | None], None] | None = None,
    ) -> None:
        self.slots = slots
        self._on_finished = on_finished
        self._policy = policy or RetryPolicy()
        #: Told, in the handler's thread (or task), which job it runs now (None: none).
        self._on_start = on_start
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._running: set[Task] = set()
        #: No running task's deadline is earlier (under the lock; may be early, never late).
        self._next_deadline = float("inf")
        self._threads: set[threading.Thread] = set()
        # Threads stuck in a handler past its timeout: they exit when (if) it returns.
        self._abandoned: set[threading.Thread] = set()
        #: Async attempts running, and those waiting for one of the ``slots`` to free (the loop's
        #: thread only): a handler process may be sent more than ``slots`` tasks at once.
        self._async_running = 0
        self._async_waiting: collections.deque[Task] = collections.deque()
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="tenantq-async-handlers", daemon=True
        )
        self._loop_thread.start()
        for _ in range(slots):
            self._spawn_thread()

    # -- public ------------------------------------------------------------------------------

    @property
    def busy(self) -> int:
        with self._lock:
            return len(self._running)

    def running(self) -> list[Task]:
        with self._lock:
            return list(self._running)

    def submit(self, task: Task) -> None:
        self.submit_many((task,))

    def submit_many(self, tasks: Sequence[Task]) -> None:
        """Start ``tasks``: sync handlers in the threads, async ones on the event loop, all
        of a call's async ones handed to the loop in one wake-up (a wake-up per job, as
        ``run_coroutine_threadsafe`` makes, cost more than the jobs of a no-op handler)."""
        with self._lock:
            running = self._running
            for task in tasks:
                running.add(task)
                if task.deadline < self._next_deadline:
                    self._next_deadline = task.deadline
        coroutines: list[Task] = []
        put = self._work.put
        for task in tasks:
            if task.job_type.is_async:
                coroutines.append(task)
            else:
                put(task)
        if coroutines:
            self._loop.call_soon_threadsafe(self._start_coroutines, coroutines)

    def expire(self, now: float | None = None) -> list[Task]:
        """Give up on tasks past their deadline; returns them (already handed over)."""
        now = time.monotonic() if now is None else now
        if now < self._next_deadline:
            return []  # asked every loop turn: look at every task only when one may be due
        expired = [task for task in self.running() if task.deadline <= now]
        with self._lock:
            self._next_deadline = min(
                (task.deadline for task in self._running if task not in expired),
                default=float("inf"),
            )
        for task in expired:
            task.context.signal_cancel("timeout")
            if self._finish(task, None, timed_out=True):
                if task.job_type.is_async:
                    self._cancel_coroutine(task)
                elif task._thread is not None:
                    with self._lock:
                        self._abandoned.add(task._thread)
                    self._spawn_thread()
        return expired

    def abandon(self, task: Task) -> bool:
        """Stop waiting for ``task`` (revoke, shutdown): its late result will be dropped.
        True when it was still running."""
        with self._lock:
            if task not in self._running:
                return False
            self._running.discard(task)
            if task._thread is not None:
                self._abandoned.add(task._thread)
        if task.trace is not None:
            task.trace.end(
                Outcome.RELEASED.value, error_class="Released", error_message="abandoned"
            )
        if task.job_type.is_async:
            self._cancel_coroutine(task)
        elif task._thread is not None:
            self._spawn_thread()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._work.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._loop.is_closed():
            return  # stopped before
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(max(0.0, deadline - time.monotonic()))
        if not self._loop_thread.is_alive():
            # Closed here, not by the collector: at collection its self-pipe may already be
            # gone, and the loop's ``__del__`` then fails (an unraisable error at exit).
            self._loop.close()

    # -- internals -----------------------------------------------------------------------------

    def _start_coroutines(self, tasks: list[Task]) -> None:
        """In the loop's thread: an asyncio task per attempt, at most ``slots`` at once (the
        rest wait for one to end). One timed out or abandoned before the loop came here has
        its cancel queued behind this call, so it is cancelled before its first step."""
        for task in tasks:
            if self._async_running >= self.slots:
                self._async_waiting.append(task)
            else:
                self._create_coroutine(task)

    def _create_coroutine(self, task: Task) -> None:
        """In the loop's thread: the attempt's asyncio task, counted until it is done (also
        when it is cancelled before its first step)."""
        self._async_running += 1
        task._future = self._loop.create_task(self._run_async(task))
        task._future.add_done_callback(self._async_ended)

    def _async_ended(self, _: object = None) -> None:
        """In the loop's thread: an async attempt ended; the next waiting one starts (one
        given up on meanwhile is skipped)."""
        self._async_running -= 1
        waiting = self._async_waiting
        while waiting:
            task = waiting.popleft()
            with self._lock:
                given_up = task not in self._running
            if not given_up:
                self._create_coroutine(task)
                return

    def _cancel_coroutine(self, task: Task) -> None:
        """Any thread: cancel an async attempt in the loop's thread (an asyncio task is not
        thread-safe). Queued behind the call that starts it, so it finds it started."""
        try:
            self._loop.call_soon_threadsafe(_cancel_in_loop, task)
        except RuntimeError:
            pass  # the loop is closed: the runner stopped, and its attempt with it

    def _begin(self, task: Task) -> bool:
        """Whether the attempt starts. A task asked to stop while it waited for a slot (a
        revoke, the shutdown, an operator) never starts: the member may have given its lease
        back already. It ends as a handler that raised ``JobCanceled`` at once would. One that
        starts has its trace begin here, in the thread or asyncio task that runs it, so the
        span is current there and only there."""
        reason = task.context.cancel_reason
        if reason is not None:
            self._finish(task, JobCanceled(f"job {task.context.job_id} canceled ({reason})"))
            return False
        if task.trace is not None:
            task.trace.begin()
        return True

    def _end(self, task: Task, error: BaseException | None) -> None:
        if task.trace is not None:
            task.trace.leave()
        self._finish(task, error)

    def _finish(self, task: Task, error: BaseException | None, *, timed_out: bool = False) -> bool:
        with self._lock:
            if task not in self._running:
                return False  # already timed out: this late result is dropped
            self._running.discard(task)
        task.finished = time.monotonic()
        task.error = error
        task.timed_out = timed_out
        task.judge(self._policy)
        if task.trace is not None:
            task.end_trace()
        self._on_finished(task)
        return True

    def _spawn_thread(self) -> None:
        thread = threading.Thread(target=self._thread_main, name="tenantq-handler", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _thread_main(self) -> None:
        me = threading.current_thread()
        while True:
            task = self._work.get()
            if task is None:
                break
            if task not in self._running:
                continue  # given up on while it waited for a thread
            task._thread = me
            self._run_sync(task)
            # Read without the lock first (almost always empty): an abandonment that lands
            # after this look is seen at the next task's end, as it was under the lock.
            if self._abandoned:
                with self._lock:
                    if me in self._abandoned:
                        self._abandoned.discard(me)
                        break
        with self._lock:
            self._threads.discard(me)

    def _run_sync(self, task: Task) -> None:
        if not self._begin(task):
            return
        for retry in range(TRANSIENT_RETRIES + 1):
            with _HandlerCall(self._on_start) as call:
                handler, payload = call.begin(task)
                handler(task.context, payload)
            if not self._retry_in_place(task, call.error, retry):
                break
            time.sleep(backoff_seconds(retry))
        self._end(task, call.error)

    async def _run_async(self, task: Task) -> None:
        if not self._begin(task):
            return
        for retry in range(TRANSIENT_RETRIES + 1):
            with _HandlerCall(self._on_start) as call:
                handler, payload = call.begin(task)
                await handler(task.context, payload)
            if not self._retry_in_place(task, call.error, retry):
                break
            await asyncio.sleep(backoff_seconds(retry))
        self._end(task, call.error)

    @staticmethod
    def _retry_in_place(task: Task, error: BaseException | None, retry: int) -> bool:
        """Deadlocks and serialization failures are retried here, a few times, before they
        count as a failed attempt (they say nothing about the job)."""
        return (
            error is not None
            and retry < TRANSIENT_RETRIES
            and not task.context.cancelled
            and is_transient_database_error(error)
        )


class _HandlerCall:
    """One call of an attempt's handler, sync or awaited, as a ``with`` block: what the block
    raises is kept in ``error`` (classified when the task is judged), never let out, and
    ``on_start`` hears that the job runs (``begin``) and, when the block ends, that none does."""

    __slots__ = ("_on_start", "error")

    def __init__(self, on_start: Callable[[uuid.UUID | None], None] | None) -> None:
        self._on_start = on_start
        self.error: BaseException | None = None

    def __enter__(self) -> _HandlerCall:
        return self

    def begin(self, task: Task) -> tuple[Handler, Any]:
        """The handler and its payload, decoded for it (a payload that does not fit its model
        raises here, inside the block, as a handler's error would)."""
        handler = task.job_type.handler
        assert handler is not None
        if self._on_start is not None:
            self._on_start(task.context.job_id)
        return handler, decode_payload(task.job_type, task.payload)

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> bool:
        if self._on_start is not None:
            self._on_start(None)
        self.error = error
        return True


def _cancel_in_loop(task: Task) -> None:
    if task._future is not None:
        task._future.cancel()
