"""What a handler gets besides its payload: who and which attempt it is, and ways to cooperate
with the worker (cancellation, heartbeats, saved progress)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenantq.errors import JobCanceled

#: Guards the lazy cancellation event of every context (taken only to wait or to cancel).
_EVENT_LOCK = threading.Lock()


class LeaseKeeper(Protocol):
    """What extends and saves the leases of a process's running jobs: the member's heartbeat,
    or a handler process's own connection. One per process, shared by every context, so
    that starting a job makes no closures of its own."""

    def renew_one(self, job_id: uuid.UUID) -> bool: ...

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool: ...


@dataclass
class JobContext:
    """The context of one attempt of one job.

    ``job_id`` is the idempotency key for the handler's side effects: an attempt may run more
    than once (at-least-once delivery), but always with the same job id.
    """

    job_id: uuid.UUID
    queue: str
    job_type: str
    tenant: str
    attempt: int
    max_attempts: int
    #: ``time.monotonic()`` value at which the worker stops waiting for this attempt.
    deadline: float
    #: What the previous attempt saved with ``checkpoint()``, or None.
    progress: Any = None
    replays: int = 0
    idempotency_key: str | None = None
    #: Made on first wait: most attempts are never waited on, and an Event costs more to
    #: build than the rest of the context (a lock and a condition).
    _cancel: threading.Event | None = field(default=None, repr=False)
    _cancel_reason: str | None = field(default=None, repr=False)
    _cancelled_at: float | None = field(default=None, repr=False)
    _leases: LeaseKeeper | None = field(default=None, repr=False)

    # -- cancellation -------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the job was asked to stop (operator cancel, shutdown, revoke, timeout)."""
        return self._cancel_reason is not None

    @property
    def cancel_reason(self) -> str | None:
        """``operator``, ``shutdown``, ``revoked``, ``timeout`` or ``lease_lost``."""
        return self._cancel_reason

    def raise_if_cancelled(self) -> None:
        """Raise ``JobCanceled`` when the job was asked to stop."""
        if self._cancel_reason is not None:
            raise JobCanceled(f"job {self.job_id} canceled ({self._cancel_reason})")

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds for a cancellation; True if one came."""
        return self._event().wait(timeout)

    def _event(self) -> threading.Event:
        with _EVENT_LOCK:
            if self._cancel is None:
                self._cancel = threading.Event()
                if self._cancel_reason is not None:
                    self._cancel.set()
            return self._cancel

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep`` that ends early, raising ``JobCanceled``, on cancellation."""
        end = time.monotonic() + seconds
        while self._cancel_reason is None:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.05))
        self.raise_if_cancelled()

    def signal_cancel(self, reason: str) -> None:
        """The worker's side: ask the handler to stop. The first reason wins."""
        with _EVENT_LOCK:
            if self._cancel_reason is not None:
                return
            self._cancelled_at = time.monotonic()
            self._cancel_reason = reason
            event = self._cancel
        if event is not None:
            event.set()

    @property
    def cancelled_at(self) -> float | None:
        return self._cancelled_at

    # -- cooperation ---------------------------------------------------------------------------

    @property
    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def heartbeat(self) -> bool:
        """Extend this job's lease now (the worker also does it on an interval). False when the
        lease is no longer ours: stop, the result will be refused."""
        if self._leases is None:
            return True
        return self._leases.renew_one(self.job_id)

    def checkpoint(self, progress: Any) -> bool:
        """Save JSON-serialisable progress; a later attempt reads it as ``ctx.progress``.
        False when the lease is no longer ours."""
        if self._leases is None:
            self.progress = progress
            return True
        saved = self._leases.checkpoint(self.job_id, self.attempt, progress)
        if saved:
            self.progress = progress
        return saved
