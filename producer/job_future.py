"""``JobFuture``: a ``concurrent.futures.Future`` that is cheap to create by the hundred thousand.

A stock ``Future`` builds a ``threading.Condition`` (an RLock, a deque and five bound methods)
and two lists, about a dozen objects the cyclic GC tracks; a producer holding the futures of
50,000 unacknowledged jobs had every collection walk all of them, which cost more than
everything else per job. A pending ``JobFuture`` is one tracked object of its own:

* it is its own condition (``_condition`` gives the future itself): a reentrant lock in a
  slot, which the futures of one batch may share (``lock``; the lock is itself tracked, so
  one per batch instead of one per job), and a list of waiting threads only once a thread
  waits on it;
* the lists of ``wait``/``as_completed`` waiters and of done-callbacks are made on first use
  (``_waiters`` and ``_done_callbacks`` make them; the code that resolves a future reads the
  slots and does not);
* slots instead of an instance dict.

It is a real ``Future`` subclass, so ``result``, ``add_done_callback``,
``concurrent.futures.wait``/``as_completed`` and ``asyncio.wrap_future`` work unchanged. The
standard ``Future`` code touches ``_waiters`` and ``_done_callbacks`` only with the future's
lock held, so making them on first use needs no lock of its own. A unit test pins the
``Future`` internals this relies on, and another runs every test of ``JobFuture`` against a
stock ``Future`` too. This module is the one place that knows those internals (the state
names in ``_state`` among them): the producer's futures take them from here.
"""

from __future__ import annotations

import _thread
import logging
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any, TypeVar

__all__ = ["FINISHED", "PENDING", "SETTLED", "JobFuture"]

T = TypeVar("T")

logger = logging.getLogger("concurrent.futures")

#: The states of a future that has an outcome (or was cancelled).
SETTLED = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})


class JobFuture(Future[T]):
    """A ``Future`` that is itself and its lock to the GC while pending (module docstring)."""

    __slots__ = (
        "_lock", "_state", "_result", "_exception", "_waiter_list", "_callback_list",
        "_sleepers",
    )  # fmt: skip

    def __init__(self, lock: _thread.RLock | None = None) -> None:
        """``lock``: a ``_thread.RLock`` shared with other futures (default: one of its own).

        Sharing is safe because the lock is only ever held for a few steps (never while a
        thread sleeps in ``wait``, which releases it), and it is reentrant, so
        ``concurrent.futures.wait`` may take it once per future it holds."""
        # Future.__init__ minus the threading.Condition and the two lists; same meaning.
        self._lock = _thread.RLock() if lock is None else lock
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiter_list: list[Any] | None = None
        self._callback_list: list[Any] | None = None
        #: Locks of the threads blocked in ``wait`` (the condition's waiters).
        self._sleepers: list[Any] | None = None

    # -- the parts of Future's state made on first use -------------------------------------

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        waiters = self._waiter_list
        if waiters is None:
            waiters = self._waiter_list = []
        return waiters

    @property
    def _done_callbacks(self) -> list[Any]:  # type: ignore[override]
        callbacks = self._callback_list
        if callbacks is None:
            callbacks = self._callback_list = []
        return callbacks

    # -- the condition: what Future and concurrent.futures use of threading.Condition ------

    @property
    def _condition(self) -> JobFuture[T]:  # type: ignore[override]
        return self

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock until notified or ``timeout``; called with the lock held.

        The lock is released as often as this thread holds it and taken back as often after
        (``threading.Condition`` does the same through private methods of the lock): a
        thread holding it twice would otherwise sleep holding it, and no other thread could
        resolve the future. The sleeper is listed before the lock is let go, so a
        ``notify_all`` between the release and the sleep still wakes it."""
        sleeper = _thread.allocate_lock()
        sleeper.acquire()
        if self._sleepers is None:
            self._sleepers = []
        self._sleepers.append(sleeper)
        held = _release_fully(self._lock)
        notified = False
        try:
            if timeout is None:
                notified = sleeper.acquire()
            elif timeout > 0:
                notified = sleeper.acquire(True, timeout)
            else:
                notified = sleeper.acquire(False)
            return notified
        finally:
            for _ in range(held):
                self._lock.acquire()
            if not notified:
                try:
                    self._sleepers.remove(sleeper)
                except ValueError:
                    pass  # notified between the timeout and re-taking the lock

    def notify_all(self) -> None:
        """Wake every waiting thread; called with the lock held."""
        sleepers = self._sleepers
        if sleepers:
            for sleeper in sleepers:
                sleeper.release()
            sleepers.clear()

    # -- resolving: Future's own steps, reading the slots so nothing is made here -----------

    def set_result(self, result: T) -> None:
        self._resolve(result, None, "add_result")

    def set_exception(self, exception: BaseException | None) -> None:
        self._resolve(None, exception, "add_exception")

    def _resolve(self, result: T | None, exception: BaseException | None, report: str) -> None:
        """Finish with ``result`` or ``exception``, telling each ``wait``/``as_completed``
        waiter through its method ``report`` (``add_result`` or ``add_exception``)."""
        with self._lock:
            if self._state in SETTLED:
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._exception = exception
            self._state = FINISHED
            if self._waiter_list:
                for waiter in self._waiter_list:
                    getattr(waiter, report)(self)
            self.notify_all()
        if self._callback_list:
            self._invoke_callbacks()

    def _invoke_callbacks(self) -> None:
        for callback in self._callback_list or ():
            try:
                callback(self)
            except Exception:
                logger.exception("exception calling callback for %r", self)


def _release_fully(lock: _thread.RLock) -> int:
    """Release ``lock``, held by this thread, until this thread no longer holds it; returns
    how many times it was held. An ``RLock`` refuses a release by a thread that does not
    hold it (``RuntimeError``), which is how the last one is known: once per ``wait``, the
    slow path of a thread that is about to sleep."""
    held = 0
    while True:
        try:
            lock.release()
        except RuntimeError:
            return held
        held += 1
