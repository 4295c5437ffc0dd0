"""The middle of a worker's drain at shutdown, the same for both kinds of worker: running jobs
finish within the drain window, the ones still running then are cancelled and their leases
given back, and the results are written."""

from __future__ import annotations

import time
from collections.abc import Callable

from tenantq.consumer.completer import Completer
from tenantq.consumer.executor import Executor
from tenantq.consumer.finishing import Finisher

#: How many times the results still waiting are flushed before the drain goes on without.
FINAL_FLUSHES = 3


def finish_running(
    *,
    executor: Executor,
    finisher: Finisher,
    completer: Completer,
    deadline: Callable[[], float],
    claiming: Callable[[], int],
    turn: Callable[[], None],
    flush_events: Callable[[], None],
) -> None:
    """Until ``deadline()`` (``time.monotonic``; asked each turn) or until nothing runs or is
    being claimed: ``turn`` (wait a moment, apply the ledger's answers), then collect what
    ended and write it. Then cancel what still runs, give its leases back, and flush."""
    while (executor.busy or claiming()) and time.monotonic() < deadline():
        turn()
        finisher.handle_crashes()
        executor.expire()
        finisher.collect()
        completer.flush(now=True)
        flush_events()
    for task in executor.running():
        executor.cancel(task, "shutdown")
    time.sleep(0.2 if executor.busy else 0)
    finisher.collect()
    abandoned = finisher.abandon(executor.running())
    completer.release(abandoned, "worker shut down before the job finished")
    for _ in range(FINAL_FLUSHES):
        completer.flush(now=True)
        if not completer.waiting:
            break
