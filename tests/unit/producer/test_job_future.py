"""JobFuture behaves as a concurrent.futures.Future everywhere the standard library uses one.

The behavioural tests run against both (``kind``): the stock ``Future`` is the plain version
that ``JobFuture`` stands in for, so a test that passes for one and not the other is a
difference between them."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    InvalidStateError,
    TimeoutError,
    as_completed,
    wait,
)

import pytest

from tenantq.producer.job_future import JobFuture

KINDS = pytest.mark.parametrize("kind", [JobFuture, Future], ids=["JobFuture", "Future"])


def resolve_later(future: Future[int], value: int, after: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(after), future.set_result(value)))
    thread.start()
    return thread


def test_same_internal_attributes_as_future() -> None:
    # JobFuture re-implements Future.__init__ and its resolving steps over these attributes:
    # this fails if a Python release changes them.
    assert set(vars(Future())) == {
        "_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"
    }  # fmt: skip
    future: JobFuture[int] = JobFuture()
    for name in vars(Future()):
        assert hasattr(future, name)
    assert future._condition is future and future._waiters == [] == future._done_callbacks


def test_a_pending_future_holds_no_condition_and_no_lists() -> None:
    future: JobFuture[int] = JobFuture()
    assert not vars(future)  # slots only
    # What it refers to while pending: its lock, strings and None; no condition, no lists.
    tracked = [type(p) for p in gc.get_referents(future) if gc.is_tracked(p)]
    assert sorted(map(str, tracked)) == sorted(map(str, [type(future._lock), type]))  # its class
    future.set_result(3)
    assert future.result(0) == 3
    assert future._waiter_list is None and future._callback_list is None  # never made


@KINDS
def test_resolving_twice_is_refused_as_future_refuses_it(kind: type[Future[int]]) -> None:
    for settle in (
        lambda f: f.set_result(1),
        lambda f: f.set_exception(ValueError()),
        lambda f: f.cancel(),
    ):
        future = kind()
        settle(future)
        with pytest.raises(InvalidStateError):
            future.set_result(2)
        with pytest.raises(InvalidStateError):
            future.set_exception(ValueError())


@KINDS
def test_a_failing_callback_is_logged_and_the_others_still_run(
    kind: type[Future[int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    future = kind()
    seen: list[int] = []
    future.add_done_callback(lambda done: 1 / 0)
    future.add_done_callback(lambda done: seen.append(done.result()))
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        future.set_result(4)
    assert seen == [4]
    assert "exception calling callback" in caplog.text


@KINDS
def test_result_waits_for_another_thread(kind: type[Future[int]]) -> None:
    future = kind()
    thread = resolve_later(future, 42, 0.05)
    assert future.result(timeout=5) == 42
    thread.join()


@KINDS
def test_result_times_out_then_still_resolves(kind: type[Future[int]]) -> None:
    future = kind()
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        future.result(timeout=0)
    future.set_result(1)
    assert future.result(timeout=0) == 1


@KINDS
def test_many_waiters_are_all_woken(kind: type[Future[int]]) -> None:
    future = kind()
    results: list[int] = []
    waiters = [
        threading.Thread(target=lambda: results.append(future.result(timeout=5))) for _ in range(8)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    future.set_result(7)
    for waiter in waiters:
        waiter.join()
    assert results == [7] * 8


@KINDS
def test_exception_and_callbacks(kind: type[Future[int]]) -> None:
    future = kind()
    seen: list[BaseException | None] = []
    future.add_done_callback(lambda done: seen.append(done.exception()))
    error = ValueError("boom")
    future.set_exception(error)
    with pytest.raises(ValueError, match="boom"):
        future.result()
    assert seen == [error]
    late: list[bool] = []
    future.add_done_callback(lambda done: late.append(done.done()))
    assert late == [True]


@KINDS
def test_wait_and_as_completed(kind: type[Future[int]]) -> None:
    futures = [kind() for _ in range(3)]
    threads = [resolve_later(future, n, 0.01 * (n + 1)) for n, future in enumerate(futures)]
    done, _ = wait(futures, timeout=5, return_when=FIRST_COMPLETED)
    assert done
    assert sorted(f.result() for f in as_completed(futures, timeout=5)) == [0, 1, 2]
    for thread in threads:
        thread.join()


@KINDS
def test_cancel_before_resolution(kind: type[Future[int]]) -> None:
    future = kind()
    assert future.cancel()
    assert future.cancelled()


@KINDS
def test_asyncio_wrap_future(kind: type[Future[int]]) -> None:
    future = kind()

    async def main() -> int:
        resolve_later(future, 5, 0.02)
        return await asyncio.wrap_future(future)

    assert asyncio.run(main()) == 5


@KINDS
def test_result_waits_in_a_thread_that_holds_the_lock_twice(kind: type[Future[int]]) -> None:
    # ``wait`` lets the lock go as often as the thread holds it, or the resolving thread
    # could never take it.
    future = kind()
    condition = future._condition  # type: ignore[attr-defined]
    results: list[int] = []

    def waits_holding_twice() -> None:
        with condition, condition:
            results.append(future.result(timeout=5))

    waiter = threading.Thread(target=waits_holding_twice)
    waiter.start()
    time.sleep(0.05)
    resolver = resolve_later(future, 9, 0)
    resolver.join(5)
    waiter.join(5)
    assert not waiter.is_alive() and results == [9]
    assert condition.acquire(timeout=1)  # and the waiter gave it back as often as it took it
    condition.release()


def test_futures_sharing_a_lock_wait_and_resolve_apart() -> None:
    import _thread

    lock = _thread.RLock()
    first: JobFuture[int] = JobFuture(lock)
    second: JobFuture[int] = JobFuture(lock)
    thread = resolve_later(second, 2, 0.02)
    with pytest.raises(TimeoutError):
        first.result(timeout=0.05)
    assert second.result(timeout=5) == 2
    first.set_result(1)
    assert first.result(0) == 1
    thread.join()
