"""What the worker's other threads hand the poll thread: finished attempts (executor threads),
crashes of the handler process (its receiver thread), and a wake-up whenever either arrives or
a ledger lane has an answer. The poll thread waits on the wake-up, not in Kafka, while work is
in flight: an answer ends its wait at once."""

from __future__ import annotations

import queue
import threading

from tenantq.consumer.runner import Task
from tenantq.consumer.simple_queues import take_all

#: (running tasks, the task that killed the process or None, one line saying how it died).
Crash = tuple[list[Task], Task | None, str]


class Inbox:
    """Thread-safe: any thread puts and wakes; only the poll thread takes, clears and waits."""

    def __init__(self) -> None:
        #: Finished attempts, in the batches the executor handed them over in.
        self._finished: queue.SimpleQueue[list[Task]] = queue.SimpleQueue()
        self._crashes: queue.SimpleQueue[Crash] = queue.SimpleQueue()
        self._wake = threading.Event()

    # -- any thread ----------------------------------------------------------------------------

    def wake(self) -> None:
        """The poll thread has something to handle."""
        if not self._wake.is_set():
            self._wake.set()

    def attempt_finished(self, task: Task) -> None:
        """An attempt ended (a handler thread of this process)."""
        self._finished.put([task])
        self.wake()

    def attempts_finished(self, tasks: list[Task]) -> None:
        """Attempts ended (a handler process's batch)."""
        self._finished.put(tasks)
        self.wake()

    def crashed(self, tasks: list[Task], culprit: Task | None, how: str) -> None:
        """The handler process died with ``tasks`` running (its receiver thread); taken at the
        poll loop's next turn."""
        self._crashes.put((tasks, culprit, how))

    # -- the poll thread -----------------------------------------------------------------------

    @property
    def has_finished(self) -> bool:
        return not self._finished.empty()

    def clear(self) -> None:
        """Called before looking at what waits: whatever arrives after the look wakes again."""
        self._wake.clear()

    def wait(self, timeout: float) -> None:
        self._wake.wait(timeout)

    def next_finished(self) -> list[Task] | None:
        """The oldest batch of finished attempts not taken yet, or None. Asked until None, so
        that a batch handed over meanwhile is taken in the same pass."""
        try:
            return self._finished.get_nowait()
        except queue.Empty:
            return None

    def take_crashes(self) -> list[Crash]:
        return take_all(self._crashes)
