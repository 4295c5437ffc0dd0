"""``JobFuture``: a ``concurrent.futures.Future`` that is cheap to create by the hundred thousand.

A stock ``Future`` builds a ``threading.Condition`` (an RLock, a deque and five bound methods),
about a dozen garbage-collected objects; at producer rates the cyclic collector then costs more
than everything else per job. ``JobFuture`` swaps in ``_FutureCondition``: one lock, and a
waiter list only once someone actually waits. It is a real ``Future`` subclass, so ``result``,
``add_done_callback``, ``concurrent.futures.wait``/``as_completed`` and
``asyncio.wrap_future`` work unchanged. A unit test pins the ``Future`` internals it relies on.
"""

from __future__ import annotations

import _thread
from concurrent.futures import Future
from concurrent.futures._base import PENDING
from typing import Any, TypeVar

T = TypeVar("T")


class _FutureCondition:
    """The part of ``threading.Condition`` that ``Future`` and ``concurrent.futures`` use:
    acquire/release (and ``with``), ``wait(timeout)`` and ``notify_all``, over a reentrant lock
    like the stock condition's."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = _thread.RLock()
        self._waiters: list[Any] | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock until notified or ``timeout``; called with the lock held."""
        waiter = _thread.allocate_lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        saved = self._lock._release_save()  # type: ignore[attr-defined]
        notified = False
        try:
            if timeout is None:
                notified = waiter.acquire()
            elif timeout > 0:
                notified = waiter.acquire(True, timeout)
            else:
                notified = waiter.acquire(False)
            return notified
        finally:
            self._lock._acquire_restore(saved)  # type: ignore[attr-defined]
            if not notified:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass  # notified between the timeout and re-taking the lock

    def notify_all(self) -> None:
        """Wake every waiter; called with the lock held."""
        waiters = self._waiters
        if waiters:
            for waiter in waiters:
                waiter.release()
            waiters.clear()


class JobFuture(Future[T]):
    """A ``Future`` with a lightweight condition (see the module docstring)."""

    def __init__(self) -> None:
        # Future.__init__ minus the threading.Condition; same attributes, same meaning.
        self._condition = _FutureCondition()  # type: ignore[assignment]
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []
