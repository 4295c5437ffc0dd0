"""Who serves the Kafka client's delivery reports, and when.

Each report's callback takes the GIL (confluent-kafka's ``dr_msg_cb``), and each time a thread
wants it while another runs Python, that thread is stopped until this one has been scheduled
and let it go; two threads serving reports at once hand it over for every report. A thread
serving reports the moment they come, during publications too, slows ``enqueue_many`` by about
a third (producer_bench). So a publication serves the reports ready at its end, and the delivery
thread keeps out of its way while a thread publishes (``publishing`` .. ``published``), then
serves them in turns of ``poll(REPORT_POLL_SECONDS)`` while jobs are in flight (each report as it
comes, so a single job is acknowledged as soon as Kafka answers), else waits for the next
publication or ``IDLE_POLL_SECONDS``, which keeps an idle producer's cost to a fraction of a
percent of a core. Turns (a reentrant lock, for a callback that enqueues) keep the threads
from serving at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("tenantq.producer")

#: The delivery thread's turns while jobs are in flight: a report is served as it comes, and
#: the turn is over this soon after. With none in flight it waits for the next publication (or
#: ``IDLE_POLL_SECONDS``).
REPORT_POLL_SECONDS = 0.001
IDLE_POLL_SECONDS = 0.1
#: The longest a thread waits for its turn before serving reports anyway: turns are short,
#: unless a user's callback blocks in one.
SERVING_TURN_SECONDS = 1.0
#: The longest a publication that took longer than ``PUBLISHING_QUIET_SECONDS`` waits for its
#: turn at its end (the delivery thread serves reports meanwhile); a shorter one does not wait:
#: the delivery thread keeps out of its way, or is serving its reports already.
ENQUEUE_TURN_SECONDS = 0.02
#: While a thread publishes (for at most ``PUBLISHING_QUIET_SECONDS`` of a publication, so that
#: one held up, by a database lookup say, does not hold up the reports of earlier ones) and
#: ``PUBLISHING_GRACE_SECONDS`` after, the delivery thread leaves the reports to it.
PUBLISHING_QUIET_SECONDS = 0.1
PUBLISHING_GRACE_SECONDS = 0.0005


class DeliveryReports:
    """Serves ``client``'s delivery reports between the publishing threads and a delivery thread
    of its own. ``between_turns`` runs in the delivery thread after each of its turns (the
    producer writes its pending rows there)."""

    def __init__(self, client: Any, between_turns: Callable[[], object] | None = None) -> None:
        self._client = client
        self._between_turns = between_turns
        #: Whose turn it is to serve reports; reentrant, for a callback that enqueues.
        self._serving = threading.RLock()
        #: Set by each publication, to wake the delivery thread from an idle wait.
        self._wake = threading.Event()
        #: Set by ``not_publishing``, to end the delivery thread's wait for a publication.
        self._unquiet = threading.Event()
        #: Until when the delivery thread leaves the reports to a publishing thread.
        self._quiet_until = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._serve_in_background, name="tenantq-producer-poll", daemon=True
        )
        self._thread.start()

    def publishing(self, started: float) -> None:
        """A publication began at ``started``: the delivery thread keeps out of its way."""
        self._quiet_until = started + PUBLISHING_QUIET_SECONDS

    def published(self) -> None:
        """The publication is over: the delivery thread may serve again, shortly."""
        self._quiet_until = time.monotonic() + PUBLISHING_GRACE_SECONDS

    def not_publishing(self) -> None:
        """The publication under way hands this client nothing (the producer's other client
        takes all of it): the delivery thread serves again at once, so this client's reports
        do not wait for the end of another client's publications."""
        self._quiet_until = 0.0
        self._unquiet.set()

    def serve(self, timeout: float, turn_timeout: float = SERVING_TURN_SECONDS) -> None:
        """``poll(timeout)`` in this thread's turn, or without one after ``turn_timeout``."""
        with self._turn(turn_timeout):
            self._client.poll(timeout)

    def serve_ready(self, started: float) -> None:
        """At the end of a publication (begun at ``started``): serve the reports that are
        ready, in this thread, which holds the GIL anyway; then wake the delivery thread for the
        rest. Skipped if the delivery thread has its turn (it serves them)."""
        long = time.monotonic() - started > PUBLISHING_QUIET_SECONDS
        with self._turn(ENQUEUE_TURN_SECONDS if long else 0) as turn:
            if turn:
                self._client.poll(0)
        self._wake.set()

    def flush(self, timeout: float) -> int:
        """``flush(timeout)`` in this thread's turn, or without one after a turn's wait;
        returns how many messages still wait for their reports."""
        with self._turn(min(timeout, SERVING_TURN_SECONDS)):
            remaining: int = self._client.flush(timeout)
        return remaining

    def stop(self) -> None:
        """Stop the delivery thread (after a flush: what is left is served by the caller)."""
        self._stop.set()
        self._wake.set()
        self._unquiet.set()
        self._thread.join()

    @contextlib.contextmanager
    def _turn(self, timeout: float) -> Iterator[bool]:
        """This thread's turn, waited for up to ``timeout``; yields whether it got it (and
        then gives it back at the end)."""
        turn = self._serving.acquire(timeout=timeout)
        try:
            yield turn
        finally:
            if turn:
                self._serving.release()

    def _in_flight(self) -> bool:
        """Messages wait for their reports (or, for a client that does not count them, may)."""
        try:
            return len(self._client) > 0
        except TypeError:
            return True

    def _serve_in_background(self) -> None:
        """The delivery thread: serves the reports when the publishing threads do not."""
        in_flight = True
        while not self._stop.is_set():
            quiet = self._quiet_until - time.monotonic()
            try:
                if quiet <= 0:
                    # A short turn: served as they come, and over soon after.
                    self.serve(REPORT_POLL_SECONDS if in_flight else 0)
                if self._between_turns is not None:
                    self._between_turns()
            except Exception:  # a failing user callback must not stop deliveries
                logger.exception("error while serving delivery reports")
            if quiet > 0:
                self._unquiet.wait(quiet)
                self._unquiet.clear()
                continue
            self._wake.clear()
            in_flight = self._in_flight()
            if not in_flight:
                self._wake.wait(IDLE_POLL_SECONDS)
