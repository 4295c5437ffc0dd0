"""``LeaseCalls``: what a running handler asks of its lease (``ctx.heartbeat()``,
``ctx.checkpoint()``), over one store connection shared under a lock: the member's heartbeat
connection, or a handler process's own.

A database that is away cannot say a lease is lost: ``renew_one`` answers True then (the
member's heartbeat tells, once it can), and ``checkpoint`` False (not saved).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenantq.errors import DatabaseUnavailable

if TYPE_CHECKING:  # a handler process opens its store on first use
    from tenantq.store.job_store import JobStore


class LeaseCalls:
    """A handler's lease calls (any handler thread)."""

    def __init__(
        self,
        store: JobStore,
        lock: threading.Lock,
        lease_seconds: float,
        *,
        unreachable: Callable[[str, DatabaseUnavailable], None],
        cancel_requested: Callable[[uuid.UUID], None] | None = None,
    ) -> None:
        self._store = store
        #: Held around each call: the connection is shared (with the heartbeat's beats, say).
        self._lock = lock
        self._lease_seconds = lease_seconds
        #: Told which call (``"ctx.heartbeat()"``, ``"ctx.checkpoint()"``) found the
        #: database away.
        self._unreachable = unreachable
        #: Told of a job an operator asked to cancel, as its renewal says.
        self._cancel_requested = cancel_requested

    def renew_one(self, job_id: uuid.UUID) -> bool:
        """Extend one lease now; True unless the lease is known lost."""
        try:
            with self._lock:
                renewed = self._store.renew_leases([job_id], self._lease_seconds, None, None)
        except DatabaseUnavailable as error:
            self._unreachable("ctx.heartbeat()", error)
            return True
        if renewed.get(job_id) and self._cancel_requested is not None:
            self._cancel_requested(job_id)
        return job_id in renewed

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        """Save the attempt's progress; False when not saved (lease lost, or the database
        away)."""
        try:
            with self._lock:
                return self._store.checkpoint(job_id, attempt, progress)
        except DatabaseUnavailable as error:
            self._unreachable("ctx.checkpoint()", error)
            return False
