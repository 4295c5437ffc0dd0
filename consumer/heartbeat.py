"""The heartbeat: one statement per interval extends the leases of every job the process holds
(running or waiting for a slot) and refreshes the worker's registry row. It also carries two
signals back: an operator's cancellation, and leases that are no longer ours."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.worker")


class Heartbeat:
    def __init__(
        self,
        store: JobStore,
        store_lock: threading.Lock,
        *,
        interval: float,
        lease_seconds: float,
        held: Callable[[], list[uuid.UUID]],
        usage: Callable[[], tuple[int, int]],
        on_cancel: Callable[[uuid.UUID], None],
        on_lost: Callable[[uuid.UUID], None],
    ) -> None:
        self._store = store
        self._lock = store_lock
        self._interval = interval
        self._lease_seconds = lease_seconds
        self._held = held
        self._usage = usage
        self._on_cancel = on_cancel
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tenantq-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self._interval + 5)

    def beat(self) -> dict[uuid.UUID, bool]:
        """Renew now; returns {job id still ours: cancel requested}."""
        held = self._held()
        busy, slots = self._usage()
        with self._lock:
            renewed = self._store.renew_leases(held, self._lease_seconds, busy, slots)
        for job_id in held:
            if job_id not in renewed:
                self._on_lost(job_id)
            elif renewed[job_id]:
                self._on_cancel(job_id)
        return renewed

    def renew_one(self, job_id: uuid.UUID) -> bool:
        """``ctx.heartbeat()``: extend one lease now."""
        busy, slots = self._usage()
        with self._lock:
            renewed = self._store.renew_leases([job_id], self._lease_seconds, busy, slots)
        if renewed.get(job_id):
            self._on_cancel(job_id)
        return job_id in renewed

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        with self._lock:
            return self._store.checkpoint(job_id, attempt, progress)

    def _main(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception:  # a database blip must not kill the heartbeat; next beat retries
                log.exception("heartbeat failed; retrying next interval")
