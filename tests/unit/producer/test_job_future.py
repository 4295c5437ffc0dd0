"""JobFuture behaves as a concurrent.futures.Future everywhere the standard library uses one."""

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


def test_resolving_twice_is_refused_as_future_refuses_it() -> None:
    for settle in (
        lambda f: f.set_result(1),
        lambda f: f.set_exception(ValueError()),
        lambda f: f.cancel(),
    ):
        future: JobFuture[int] = JobFuture()
        settle(future)
        with pytest.raises(InvalidStateError):
            future.set_result(2)
        with pytest.raises(InvalidStateError):
            future.set_exception(ValueError())


def test_a_failing_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    future: JobFuture[int] = JobFuture()
    seen: list[int] = []
    future.add_done_callback(lambda done: 1 / 0)
    future.add_done_callback(lambda done: seen.append(done.result()))
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        future.set_result(4)
    assert seen == [4]
    assert "exception calling callback" in caplog.text


def test_result_waits_for_another_thread() -> None:
    future: JobFuture[int] = JobFuture()
    thread = resolve_later(future, 42, 0.05)
    assert future.result(timeout=5) == 42
    thread.join()


def test_result_times_out_then_still_resolves() -> None:
    future: JobFuture[int] = JobFuture()
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        future.result(timeout=0)
    future.set_result(1)
    assert future.result(timeout=0) == 1


def test_many_waiters_are_all_woken() -> None:
    future: JobFuture[int] = JobFuture()
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


def test_exception_and_callbacks() -> None:
    future: JobFuture[int] = JobFuture()
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


def test_wait_and_as_completed() -> None:
    futures: list[JobFuture[int]] = [JobFuture() for _ in range(3)]
    threads = [resolve_later(future, n, 0.01 * (n + 1)) for n, future in enumerate(futures)]
    done, _ = wait(futures, timeout=5, return_when=FIRST_COMPLETED)
    assert done
    assert sorted(f.result() for f in as_completed(futures, timeout=5)) == [0, 1, 2]
    for thread in threads:
        thread.join()


def test_cancel_before_resolution() -> None:
    future: JobFuture[int] = JobFuture()
    assert future.cancel()
    assert future.cancelled()


def test_asyncio_wrap_future() -> None:
    future: JobFuture[int] = JobFuture()

    async def main() -> int:
        resolve_later(future, 5, 0.02)
        return await asyncio.wrap_future(future)

    assert asyncio.run(main()) == 5
