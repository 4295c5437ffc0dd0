"""The worker's writes to Postgres, off the poll thread: claims on one connection, results on
another, so a claim never waits behind a completion and neither blocks the poll loop. The
claims of jobs read from a hot lane have a connection of their own: a flooding tenant keeps
its claims lane busy, and the other tenants' claims must not queue behind them.

The poll thread hands an operation to a lane (``claim``, ``complete``, ...) and carries on;
the lane's thread runs it and puts it back, done, on ``finished``, which the poll thread
drains and applies (only the poll thread touches the worker's state). A lane keeps its
operations in order, so everything the poll thread asked for is done in the order it asked.

When the database goes away, a lane keeps its operation and tries it again (after
``DatabaseHealth.backoff``) until it goes through: the operations wait in the lanes — the
outage buffer — while the poll loop, told by ``DatabaseHealth``, claims nothing new. An
operation whose connection dropped mid-way may have been applied; it runs again in its
*again* form, which recognises what it did before (an adopted lease, an attempt row already
written). When the server refuses the rows themselves (``tenantq.store.transient.is_refusal``),
the operation is split in halves until the rows at fault stand alone; they are reported as
``refused`` with the reason, the others go through.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import psycopg

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.simple_queues import take_all
from tenantq.errors import DatabaseUnavailable
from tenantq.store.job_store import ClaimRequest, Completed, JobStatus, JobStore, Lease, Result
from tenantq.store.quota_claim import ClaimQuotas, Throttle
from tenantq.store.transient import describe_database_error, is_refusal

log = logging.getLogger("tenantq.worker")

Item = TypeVar("Item")
Answer = TypeVar("Answer")


@dataclass(eq=False)
class Operation(Generic[Item, Answer]):
    """Rows to write in one statement (or a few), and what came back. ``context`` is the
    poll thread's own (which work items these rows are), untouched by the lane."""

    rows: list[Item]
    context: Any = None
    answer: Answer | None = None
    #: Rows the server refused, with its reason (each alone in its statement).
    refused: list[tuple[Item, str]] = field(default_factory=list)

    def run(self, store: JobStore, rows: list[Item], again: bool) -> Answer:
        raise NotImplementedError

    def merge(self, first: Answer, second: Answer) -> Answer:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class ClaimSettings:
    lease_seconds: float
    stale_owner_seconds: float
    crash_budget: int


@dataclass(eq=False)
class Claim(Operation[ClaimRequest, "ClaimAnswer"]):
    """Lease the jobs of ``rows`` (within their tenants' limits, when ``quotas`` says some
    apply); for those neither leased nor held back by a limit, read what they are."""

    settings: ClaimSettings | None = None
    #: The tenants' limits to apply (``tenantq.quotas.book``); None: none of them has any.
    quotas: ClaimQuotas | None = None
    #: When the poll thread handed it over (``time.monotonic``).
    submitted: float = field(default_factory=time.monotonic)

    def run(self, store: JobStore, rows: list[ClaimRequest], again: bool) -> ClaimAnswer:
        assert self.settings is not None
        settings = self.settings
        # A try whose connection dropped may have leased them to us already.
        adoptable = [row.job_id for row in rows] if again else ()
        throttles: dict[uuid.UUID, Throttle] = {}
        if self.quotas is None:
            leases = store.claim_batch(
                rows,
                settings.lease_seconds,
                settings.stale_owner_seconds,
                settings.crash_budget,
                adoptable=adoptable,
            )
        else:
            leases, throttles = store.claim_batch_limited(
                rows,
                self.quotas,
                settings.lease_seconds,
                settings.stale_owner_seconds,
                settings.crash_budget,
                adoptable=adoptable,
            )
        rest = [
            row.job_id for row in rows if row.job_id not in leases and row.job_id not in throttles
        ]
        return ClaimAnswer(leases, store.states_of(rest), again, throttles)

    def merge(self, first: ClaimAnswer, second: ClaimAnswer) -> ClaimAnswer:
        return ClaimAnswer(
            {**first.leases, **second.leases},
            {**first.statuses, **second.statuses},
            first.again or second.again,
            {**first.throttles, **second.throttles},
        )


@dataclass(frozen=True, slots=True)
class ClaimAnswer:
    leases: dict[uuid.UUID, Lease]
    statuses: dict[uuid.UUID, JobStatus]
    #: Ran again after a dropped connection: a lease may be our own, adopted, not taken over.
    again: bool = False
    #: Jobs a tenant's limit held back: not touched (no attempt spent), to ask for again.
    throttles: dict[uuid.UUID, Throttle] = field(default_factory=dict)


@dataclass(eq=False)
class Complete(Operation[Result, Completed]):
    """Write results, fenced; the answer is the jobs whose result was applied, and those set
    aside because another transaction held their row."""

    def run(self, store: JobStore, rows: list[Result], again: bool) -> Completed:
        return store.complete_batch(rows, again=again)

    def merge(self, first: Completed, second: Completed) -> Completed:
        return Completed(first.applied | second.applied, first.locked | second.locked)


@dataclass(frozen=True, slots=True)
class Settle:
    """Decisions on jobs the claim did not take: cancel those asked to, bury the exhausted."""

    cancel: list[uuid.UUID]
    bury: list[uuid.UUID]
    crash_budget: int


@dataclass(eq=False)
class SettleWaiting(Operation[Settle, tuple[set[uuid.UUID], set[uuid.UUID]]]):
    """(canceled, buried) job ids."""

    def run(
        self, store: JobStore, rows: list[Settle], again: bool
    ) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
        canceled: set[uuid.UUID] = set()
        buried: set[uuid.UUID] = set()
        for settle in rows:
            canceled |= store.cancel_waiting(settle.cancel)
            buried |= store.bury_exhausted(settle.bury, settle.crash_budget)
        return canceled, buried

    def merge(
        self,
        first: tuple[set[uuid.UUID], set[uuid.UUID]],
        second: tuple[set[uuid.UUID], set[uuid.UUID]],
    ) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
        return first[0] | second[0], first[1] | second[1]


#: (job id, attempt, started at, duration ms) of an attempt whose process died.
CrashedAttempt = tuple[uuid.UUID, int, dt.datetime | None, int]


@dataclass(eq=False)
class CountCrashes(Operation[CrashedAttempt, dict[uuid.UUID, int]]):
    """Count a process death against each job that was running in it; the answer is each
    job's crash count now (jobs no longer ours are missing)."""

    reason: str = ""

    def run(self, store: JobStore, rows: list[CrashedAttempt], again: bool) -> dict[uuid.UUID, int]:
        return store.count_crashes(rows, self.reason)

    def merge(
        self, first: dict[uuid.UUID, int], second: dict[uuid.UUID, int]
    ) -> dict[uuid.UUID, int]:
        return {**first, **second}


@dataclass(eq=False)
class EnterLane(Operation[tuple[str, str, str], bool]):
    """Move tenants (queue, tenant, reason) to their queue's hot lane."""

    def run(self, store: JobStore, rows: list[tuple[str, str, str]], again: bool) -> bool:
        return all([store.enter_lane(queue, tenant, reason) for queue, tenant, reason in rows])

    def merge(self, first: bool, second: bool) -> bool:
        return first and second


class OperationLane(Protocol):
    """A lane as the parts that hand it operations see it (``Lane``)."""

    @property
    def pending(self) -> int: ...

    @property
    def connections(self) -> int: ...

    def submit(self, operation: Operation[Any, Any]) -> None: ...


class Lane:
    """Connections, a thread each, running the operations given in turn. With one connection
    the operations run in the order they were given; with several (the claims lane), up to
    that many run at once, each on its own connection and transaction."""

    def __init__(
        self,
        name: str,
        stores: Sequence[JobStore],
        health: DatabaseHealth,
        finished: queue.SimpleQueue[Operation[Any, Any]],
        on_answer: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self._on_answer = on_answer
        #: A connection per thread, each opened on its thread's first operation.
        self._stores = list(stores)
        self._health = health
        self._finished = finished
        self._work: queue.SimpleQueue[Operation[Any, Any] | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        #: Operations given and not finished yet (read by the poll thread; changed under lock).
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._threads = [
            threading.Thread(target=self._main, args=(store,), name=f"tenantq-ledger-{name}")
            for store in self._stores
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    @property
    def connections(self) -> int:
        """Operations that may run at once."""
        return len(self._stores)

    @property
    def pending(self) -> int:
        return self._pending

    def submit(self, operation: Operation[Any, Any]) -> None:
        with self._lock:
            self._pending += 1
        self._work.put(operation)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every operation given so far is finished; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stop(self, timeout: float) -> None:
        self._stop.set()
        for _ in self._threads:
            self._work.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for store in self._stores:
            store.close()

    def _main(self, store: JobStore) -> None:
        while True:
            operation = self._work.get()
            if operation is None or self._stop.is_set():
                return
            try:
                self._execute(operation, store)
            except Exception:  # a bug must not silently stop the lane: log, hand it back
                log.exception("ledger lane %s: operation failed", self.name)
            self._finished.put(operation)
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
            self._on_answer()

    def _execute(self, operation: Operation[Any, Any], store: JobStore) -> None:
        attempt = 0
        again = False
        while True:
            operation.refused = []
            try:
                operation.answer = self._split_on_refusal(operation, store, operation.rows, again)
            except DatabaseUnavailable as error:
                self._health.failed(str(error), error.opened_at)
                again = True
                if self._stop.wait(self._health.backoff(attempt)):
                    raise
                attempt += 1
                continue
            self._health.succeeded()
            return

    def _split_on_refusal(
        self, operation: Operation[Any, Any], store: JobStore, rows: Sequence[Any], again: bool
    ) -> Any:
        try:
            return operation.run(store, list(rows), again)
        except psycopg.Error as error:
            if not is_refusal(error):
                raise DatabaseUnavailable(describe_database_error(error)) from error
            if len(rows) == 1:
                reason = describe_database_error(error)
                log.warning("the database refused a row: %s", reason)
                operation.refused.append((rows[0], reason))
                return operation.run(store, [], again)
            middle = len(rows) // 2
            first = self._split_on_refusal(operation, store, rows[:middle], again)
            second = self._split_on_refusal(operation, store, rows[middle:], again)
            return operation.merge(first, second)


class Ledger:
    """The lanes of a worker (claims, the hot lane's claims, results) and the queue they hand
    answers back on (``on_answer`` is called after each). A lane's connections open on their
    first operation.

    The claims lane has ``claim_connections`` connections: a claim's commit waits for its WAL
    to reach the disk, and on one connection every claim behind it waits too (the tail of
    enqueue-to-start when the disk is slow to flush). With two, the next claim runs while the
    last one's commit waits; both flushes are then often one (Postgres flushes what has been
    written by the time it gets to it). Each claim is still its own transaction, answered only
    once committed: a job starts only after its lease is durable."""

    def __init__(
        self,
        open_store: Callable[[str], JobStore],
        health: DatabaseHealth,
        on_answer: Callable[[], None] = lambda: None,
        claim_connections: int = 1,
    ) -> None:
        self.health = health
        self.finished: queue.SimpleQueue[Operation[Any, Any]] = queue.SimpleQueue()

        def lane(name: str, connections: int = 1) -> Lane:
            stores = [open_store(name) for _ in range(connections)]
            return Lane(name, stores, health, self.finished, on_answer)

        self.claims = lane("claims", claim_connections)
        self.lane_claims = lane("lane-claims")
        self.results = lane("results")
        self._lanes = (self.claims, self.lane_claims, self.results)

    def start(self) -> None:
        for lane in self._lanes:
            lane.start()

    @property
    def pending(self) -> int:
        """Operations given to the lanes and not finished."""
        return sum(lane.pending for lane in self._lanes)

    @property
    def has_answers(self) -> bool:
        """Finished operations wait for the poll thread to apply them."""
        return not self.finished.empty()

    def wait_idle(self, timeout: float) -> bool:
        return all(lane.wait_idle(timeout) for lane in self._lanes)

    def drain(self) -> list[Operation[Any, Any]]:
        """Operations finished since the last drain, in the order they finished."""
        return take_all(self.finished)

    def stop(self, timeout: float) -> None:
        for lane in self._lanes:
            lane.stop(timeout)
