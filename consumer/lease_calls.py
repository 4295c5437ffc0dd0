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
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from tenantq.errors import DatabaseUnavailable

if TYPE_CHECKING:  # a handler process opens its store on first use
    from tenantq.store.job_store import JobStore


@dataclass(eq=False, repr=False, slots=True)
class LeaseCalls:
    """A handler's lease calls (any handler thread)."""

    store: JobStore
    #: Held around each call: the connection is shared (with the heartbeat's beats, say).
    lock: threading.Lock
    lease_seconds: float
    _: KW_ONLY
    #: Told which call (``"ctx.heartbeat()"``, ``"ctx.checkpoint()"``) found the
    #: database away.
    unreachable: Callable[[str, DatabaseUnavailable], None]
    #: Told of a job an operator asked to cancel, as its renewal says.
    cancel_requested: Callable[[uuid.UUID], None] | None = None

    def renew_one(self, job_id: uuid.UUID) -> bool:
        """Extend one lease now; True unless the lease is known lost."""
        try:
            with self.lock:
                renewed = self.store.renew_leases([job_id], self.lease_seconds, None, None)
        except DatabaseUnavailable as error:
            self.unreachable("ctx.heartbeat()", error)
            return True
        if renewed.get(job_id) and self.cancel_requested is not None:
            self.cancel_requested(job_id)
        return job_id in renewed

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        """Save the attempt's progress; False when not saved (lease lost, or the database
        away)."""
        try:
            with self.lock:
                return self.store.checkpoint(job_id, attempt, progress)
        except DatabaseUnavailable as error:
            self.unreachable("ctx.checkpoint()", error)
            return False
