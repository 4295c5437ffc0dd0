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
import time
from collections.abc import Callable
from typing import Any

import psycopg

from tenantq.app import App, resolve_max_attempts
from tenantq.producer.delivery import UNCONFIRMED_ERROR, Callback
from tenantq.producer.request import Destination, EncodedJob, PreparedJobs
from tenantq.schemas.envelope import decode_envelope
from tenantq.settings import Settings
from tenantq.store.engine import DeploymentConnection, connect
from tenantq.store.job_store import ClaimRequest
from tenantq.store.pending import insert_pending
from tenantq.store.transient import describe_database_error, is_refusal
from tenantq.topics import lane_topic, main_topic

logger = logging.getLogger("tenantq.producer")

#: Pending rows kept while the database is away, at most (the oldest go first past it).
MAX_HELD = 100_000


class PendingRecorder:
    """Collects acknowledged scheduled messages (from the delivery thread) and writes their
    rows in batches (from the producer's poll thread and on close)."""

    def __init__(self, settings: Settings, app: App | None) -> None:
        self._settings = settings
        self._app = app
        self._lock = threading.Lock()
        #: Acknowledged messages whose rows are not written yet (delivery thread appends).
        self._acknowledged: list[tuple[bytes, str, int, int]] = []
        self._connection: DeploymentConnection | None = None
        #: While the database is away: since when, the next try, and the pause before it.
        self._away_since: float | None = None
        self._retry_at = 0.0
        self._backoff = 0.0
        #: Per queue, the topics of jobs that run now (main, hot lane): they get no row.
        self._run_now_topics: dict[str, frozenset[str]] = {}

    def delivery_callback(
        self,
        jobs: PreparedJobs,
        index: int,
        destination: Destination,
        on_delivery: Callback,
        send_again: Callable[[EncodedJob, Callback, int], bool],
    ) -> Callback:
        """``on_delivery``, plus the pending row of the job at ``index`` of ``jobs`` (bound for
        ``destination``) once Kafka holds it, where the job gets one (scheduled for later, or
        keyed). A report without an offset is no proof that Kafka holds the job: it is sent
        again (``send_again``), and its row waits for a report with an offset."""
        run_now = self._run_now_topics.get(destination.queue)
        if run_now is None:
            prefix = self._settings.topic_prefix
            run_now = self._run_now_topics[destination.queue] = frozenset(
                (main_topic(prefix, destination.queue), lane_topic(prefix, destination.queue))
            )
        if destination.topic in run_now and not destination.keyed:
            return on_delivery
        job = jobs[index]
        acknowledged = self.acknowledged
        sent_again = 0

        def deliver(error: Any, delivered: Any) -> None:
            nonlocal sent_again
            if error is None and delivered.offset() is None:
                # Not proof that Kafka holds it (``tenantq.producer.delivery``): sent again,
                # reported here again.
                sent_again += 1
                if send_again(job, deliver, sent_again - 1):
                    return
                error = UNCONFIRMED_ERROR
            on_delivery(error, delivered)
            acknowledged(error, delivered)

        return deliver

    def acknowledged(self, error: Any, message: Any) -> None:
        """Delivery callback part: remember a scheduled message Kafka now holds."""
        if error is None:
            with self._lock:
                self._acknowledged.append(
                    (message.value(), message.topic(), message.partition(), message.offset())
                )

    def write(self, *, now_or_never: bool = False) -> int:
        """Insert the rows of everything acknowledged so far; returns how many were new.

        With the database away the rows are kept (up to ``MAX_HELD``) and tried again with
        a growing pause: the jobs are safe in Kafka either way, and a row the producer never
        writes is made by the worker when the job comes due. ``now_or_never`` (closing): one
        try, whatever the pause."""
        now = time.monotonic()
        with self._lock:
            if not self._acknowledged or (now < self._retry_at and not now_or_never):
                return 0
            batch, self._acknowledged = self._acknowledged, []
        rows, run_afters = zip(*(self._row(*entry) for entry in batch), strict=True)
        try:
            if self._connection is None or self._connection.closed:
                self._connection = connect(self._settings, application_name="tenantq-producer")
            written = insert_pending(self._connection, rows, run_afters)
        except psycopg.Error as error:
            self.close()
            if is_refusal(error):
                logger.warning(
                    "the database refused %d pending rows (%s); their jobs get rows when due",
                    len(rows),
                    describe_database_error(error),
                )
                return 0
            self._held_back(batch, describe_database_error(error))
            return 0
        if self._away_since is not None:
            logger.warning(
                "database reachable again after %.1fs; pending rows written",
                now - self._away_since,
            )
            self._away_since, self._backoff = None, 0.0
        return written

    def _held_back(self, batch: list[tuple[bytes, str, int, int]], reason: str) -> None:
        now = time.monotonic()
        if self._away_since is None:
            self._away_since = now
            logger.warning("database unreachable (%s); keeping pending rows to write later", reason)
        self._backoff = min(max(self._backoff * 2, 0.5), 30.0)
        with self._lock:
            self._retry_at = now + self._backoff
            kept = batch + self._acknowledged
            if len(kept) > MAX_HELD:
                logger.warning(
                    "dropping %d pending rows past %d held (their jobs get rows when due)",
                    len(kept) - MAX_HELD,
                    MAX_HELD,
                )
                kept = kept[-MAX_HELD:]
            self._acknowledged = kept

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
