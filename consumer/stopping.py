"""A graceful stop, asked for from any thread, and the drain window it leaves."""

from __future__ import annotations

import threading
import time


class StopRequest:
    """Set from any thread (signal handlers, the worker's ``stop``); read by the poll thread."""

    def __init__(self, drain_seconds: float) -> None:
        self._requested = threading.Event()
        self._drain_seconds = drain_seconds
        #: ``time.monotonic`` value at which the drain stops waiting; None until it begins.
        self._deadline: float | None = None

    def request(self, *, immediately: bool = False) -> None:
        """Stop gracefully; ``immediately`` (or a second request) skips the drain window."""
        if self._requested.is_set() or immediately:
            self._deadline = time.monotonic()
        self._requested.set()

    def is_set(self) -> bool:
        return self._requested.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, ending early when a stop is requested."""
        return self._requested.wait(timeout)

    def drain_deadline(self) -> float:
        """When the drain gives up on running jobs: the drain window after it began, or now
        once the stop was asked for again."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self._drain_seconds
        return self._deadline
