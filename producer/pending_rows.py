"""Pending rows of scheduled jobs (and of jobs with an idempotency key, so that the next
enqueue of the key finds it), written by the producer once Kafka holds the job.

The row is inserted after the acknowledgement, never before, so a failed enqueue leaves no
orphan row that would look like a stuck job. If the producer dies in between, nothing is
lost: the worker creates the row when the job comes due. Producers without database access
(no ``TENANTQ_DATABASE_URL``) skip this; their scheduled jobs get a row when due.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import psycopg
from tenantq.app import App, resolve_max_attempts
from tenantq.schemas.envelope import decode_envelope
from tenantq.settings import Settings
from tenantq.store.engine import connect
from tenantq.store.job_store import ClaimRequest
from tenantq.store.pending import insert_pending

logger = logging.getLogger("tenantq.producer")


class PendingRecorder:
    """Collects acknowledged scheduled messages (from the delivery thread) and writes their
    rows in batches (from the producer's poll thread and on close)."""

    def __init__(self, settings: Settings, app: App | None) -> None:
        self._settings = settings
        self._app = app
        self._lock = threading.Lock()
        self._acknowledged: list[tuple[bytes, str, int, int]] = []
        self._connection: psycopg.Connection[Any] | None = None

    def acknowledged(self, error: Any, message: Any) -> None:
        """Delivery callback part: remember a scheduled message Kafka now holds."""
        if error is None:
            with self._lock:
                self._acknowledged.append(
                    (message.value(), message.topic(), message.partition(), message.offset())
                )

    def write(self) -> int:
        """Insert the rows of everything acknowledged so far; returns how many were new."""
        with self._lock:
            batch, self._acknowledged = self._acknowledged, []
        if not batch:
            return 0
        rows, run_afters = zip(*(self._row(*entry) for entry in batch), strict=True)
        try:
            if self._connection is None or self._connection.closed:
                self._connection = connect(self._settings, application_name="tenantq-producer")
            return insert_pending(self._connection, rows, run_afters)
        except psycopg.Error as error:
            # The job is safe in Kafka; its row will be made when it comes due.
            logger.warning("could not record %d scheduled jobs as pending: %s", len(rows), error)
            self.close()
            return 0

    def _row(
        self, value: bytes, topic: str, partition: int, offset: int
    ) -> tuple[ClaimRequest, dt.datetime]:
        envelope = decode_envelope(value, max_bytes=self._settings.max_message_bytes)
        job_type = self._app.find(envelope.job_type) if self._app is not None else None
        max_attempts = resolve_max_attempts(
            envelope.max_attempts, job_type, self._settings.worker.default_max_attempts
        )
        row = ClaimRequest.of(
            envelope,
            queue=envelope.queue,
            max_attempts=max_attempts,
            origin=(topic, partition, offset),
        )
        # A keyed job due at once gets its row too (so its key is seen), due when enqueued.
        return row, envelope.run_after or envelope.created_at

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
