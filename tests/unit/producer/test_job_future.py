"""JobFuture behaves as a concurrent.futures.Future everywhere the standard library uses one."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, TimeoutError, as_completed, wait

import pytest
from tenantq.producer.job_future import JobFuture


def resolve_later(future: Future[int], value: int, after: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(after), future.set_result(value)))
    thread.start()
    return thread


def test_same_internal_attributes_as_future() -> None:
    # JobFuture re-implements Future.__init__: this fails if a Python release changes it.
    assert set(vars(JobFuture())) == set(vars(Future()))


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
