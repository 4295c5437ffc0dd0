"""Offsets behind the standbys, and a new start after a failover.

A worker commits a partition's offset only past jobs whose state is durable in PostgreSQL.
With an asynchronous standby, durable on the primary is not enough: a failover to the standby
loses what it had not received (the new primary goes on, on a new timeline, from an earlier
point of the old one's history), and an offset Kafka already holds past such a job leaves
nobody to run it: its row gone, or its result gone and its lease left behind. Measured on the
fault suite's failover (replication cut for 2 s, then the primary crashed and the standby
promoted): 300 of 3,000 acknowledged jobs lost in three failovers.

With ``worker.offsets_wait_for_standbys`` = N (> 0) the worker keeps the promise against the
standbys, and starts over from there when the database fails over:

* positions move (poll thread, ``StandbyGate.store``): they are kept, stamped with the time;
* every 100 ms (``StandbyWatch``, a thread and connection of its own): the primary is read,
  its timeline, the WAL it has written and the N-th standby's flush position
  (``tenantq.store.replication``);
* once the standbys have flushed a reading (poll thread): the positions kept before it are
  stored, and the client commits them;
* a new timeline (poll thread, ``Handover.rewind``): every partition is given up as lost and
  read again from its last stored position, and the leases left from the old history are
  given back.

A reading taken at time T says where the WAL ended at T: every transaction acknowledged
before T lies below it. The poll loop marks a job done only after its state was acknowledged,
so positions kept at time t are safe once some reading taken at T >= t is below the standbys'
flush position. After a failover the safe positions are below what the promoted standby had
(one of the N), so reading again from them runs every job whose claim or result went with the
old primary (a duplicate by design), and the claim finds done whatever the standby had.

While fewer than N standbys stream, positions are held (and the worker says so every
minute): a standby away is exactly when a failover would lose the most.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from confluent_kafka import Consumer

from tenantq.consumer.partitions import Key, Partitions
from tenantq.settings import Settings
from tenantq.store.engine import LazyConnection
from tenantq.store.replication import ReplicationPosition, replication_position

log = logging.getLogger("tenantq.worker")

#: How often the primary is read.
WATCH_INTERVAL_SECONDS = 0.1
#: Positions moved within this long of each other are kept together (one snapshot).
SNAPSHOT_SECONDS = 0.05
#: Snapshots kept at most while the standbys lag (older ones are merged: that only delays
#: them, it never stores a position early).
SNAPSHOTS_KEPT = 2_000
#: How long positions may be held before the worker says so (and again every this long).
HELD_WARNING_SECONDS = 60.0
#: Readings tried at start before the watch goes on in its thread.
FIRST_READING_TRIES = 5

#: (timeline generation, monotonic time before which every acknowledged write is on the
#: standbys)
Reading = tuple[int, float]


class StandbyWatch:
    """Reads the primary every ``interval`` seconds on a connection of its own (its thread),
    and keeps what the poll thread asks for: how many timelines it has seen change, and the
    time before which every acknowledged write is flushed by the standbys asked about.

    ``read`` is one reading on ``connection`` (opened when needed, dropped after a failed
    reading); ``run_round`` is one turn of the thread, for tests."""

    def __init__(
        self,
        connection: LazyConnection,
        read: Callable[[psycopg.Connection[Any]], ReplicationPosition],
        *,
        interval: float = WATCH_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connection = connection
        self._read = read
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        # Under the lock:
        self._generation = 0
        self._timeline: int | None = None
        self._safe_before = float("-inf")
        #: (when a reading was taken, the WAL written then), oldest first, not yet flushed.
        self._marks: collections.deque[tuple[float, int]] = collections.deque()
        self._hidden = 0
        self._short = False
        # The watch thread's own:
        self._failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tenantq-standby-watch", daemon=True)

    @classmethod
    def for_worker(cls, settings: Settings, worker_id: str) -> StandbyWatch:
        """The watch of a worker: its own connection, the standbys its settings ask for."""
        standbys = settings.worker.offsets_wait_for_standbys
        return cls(
            LazyConnection(settings, f"tenantq-standby-watch {worker_id}", autocommit=True),
            lambda connection: replication_position(connection, standbys),
        )

    # -- the poll thread's side ------------------------------------------------------------

    def reading(self) -> Reading:
        with self._lock:
            return self._generation, self._safe_before

    @property
    def standbys_short(self) -> bool:
        """The last reading found fewer standbys streaming than asked for."""
        return self._short

    @property
    def hidden(self) -> int:
        """Standbys the last reading could not see the positions of (the role lacks
        pg_read_all_stats)."""
        return self._hidden

    # -- its thread ------------------------------------------------------------------------

    def start(self) -> None:
        """A first reading now (the timeline every later one is held against: a failover
        before it would go unseen), then one every ``interval`` in the watch's thread."""
        for attempt in range(FIRST_READING_TRIES):
            if self.run_round():
                break
            time.sleep(_backoff(attempt))
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._close()

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = self._interval if self.run_round() else _backoff(self._failures)
            self._stop.wait(wait)

    def run_round(self) -> bool:
        """One reading; False when the primary could not be read (tried again later)."""
        taken = self._clock()
        try:
            position = self._read(self._connection.get())
        except psycopg.Error as error:
            self._failures += 1
            if self._failures == 1:
                log.debug("standby watch: cannot read the primary: %s", error)
            self._close()
            return False
        self._failures = 0
        self.note(taken, position)
        return True

    def note(self, taken: float, position: ReplicationPosition) -> None:
        """A reading taken at ``taken`` (monotonic, before it was asked for)."""
        with self._lock:
            if self._timeline is not None and position.timeline != self._timeline:
                # A failover: the new history is safe from nowhere yet.
                self._generation += 1
                self._marks.clear()
                self._safe_before = float("-inf")
                log.warning(
                    "the database is on timeline %d, no longer %d: it failed over",
                    position.timeline,
                    self._timeline,
                )
            self._timeline = position.timeline
            self._hidden = position.hidden
            self._short = position.standbys_flushed is None
            marks = self._marks
            marks.append((taken, position.written))
            flushed = position.standbys_flushed
            if flushed is not None:
                while marks and marks[0][1] <= flushed:
                    self._safe_before = marks.popleft()[0]
            if len(marks) > SNAPSHOTS_KEPT:
                marks.popleft()  # fewer points to release at, never an early one

    def _close(self) -> None:
        try:
            self._connection.close()
        except psycopg.Error:
            pass


def _backoff(failures: int) -> float:
    """Seconds before the next try: short, since a failover is noticed on the first reading
    of the new primary, and every second of it is a second before the worker reads again."""
    return min(1.0, WATCH_INTERVAL_SECONDS * 2.0 ** min(failures, 4))


@dataclass
class _Snapshot:
    created: float
    taken: float
    positions: dict[Key, tuple[int, int]] = field(default_factory=dict)


class StandbyGate:
    """The poll thread's side: commit positions wait here until the standbys hold what is
    behind them (``store``), and a new timeline is reported (``store`` returns False)."""

    def __init__(
        self,
        watch: StandbyWatch,
        partitions: Partitions,
        consumer: Consumer,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._watch = watch
        self._partitions = partitions
        self._consumer = consumer
        self._clock = clock
        self._generation, _ = watch.reading()
        self._pending: collections.deque[_Snapshot] = collections.deque()
        self._warned_at = float("-inf")

    @property
    def holding(self) -> int:
        """Snapshots of positions not stored yet."""
        return len(self._pending)

    @property
    def failed_over(self) -> bool:
        """The database is on a new timeline, and the partitions were not read again since
        (``rewound``)."""
        return self._watch.reading()[0] != self._generation

    def store(self) -> bool:
        """Keep the positions that moved; store those the standbys now hold. False once the
        database is on a new timeline: nothing is stored until the caller has read every
        partition again from the positions stored so far (``Handover.rewind``) and said so
        (``rewound``)."""
        now = self._clock()
        moved = self._partitions.moved_positions()
        pending = self._pending
        if moved:
            last = pending[-1] if pending else None
            if last is not None and now - last.created < SNAPSHOT_SECONDS:
                last.positions.update(moved)
                last.taken = now
            else:
                pending.append(_Snapshot(now, now, moved))
                if len(pending) > SNAPSHOTS_KEPT:
                    # Merged into the next, which was taken later: stored later, never early.
                    first = pending.popleft()
                    first.positions.update(pending[0].positions)
                    pending[0].positions = first.positions
        generation, safe_before = self._watch.reading()
        if generation != self._generation:
            return False
        released: dict[Key, tuple[int, int]] = {}
        while pending and pending[0].taken <= safe_before:
            released.update(pending.popleft().positions)
        if released:
            self._partitions.store_positions(self._consumer, released)
        if pending and now - pending[0].taken > HELD_WARNING_SECONDS:
            self._warn(now - pending[0].taken)
        return True

    def rewound(self) -> None:
        """Every partition was read again after the failover: the positions kept until now
        belong to the old history and go."""
        self._generation, _ = self._watch.reading()
        self._pending.clear()

    def settle(self, timeout: float) -> bool:
        """Store until nothing is held, for at most ``timeout`` seconds (before a commit on
        revoke and at shutdown); True when nothing is held. After a failover nothing more is
        stored (the poll loop reads everything again)."""
        deadline = self._clock() + timeout
        while self.store():
            if not self._pending:
                return True
            if self._clock() >= deadline:
                return False
            time.sleep(0.02)
        return False

    def _warn(self, held: float) -> None:
        now = self._clock()
        if now - self._warned_at < HELD_WARNING_SECONDS:
            return
        self._warned_at = now
        why = (
            f"{self._watch.hidden} standby position(s) hidden from this role (grant it "
            "pg_read_all_stats)"
            if self._watch.hidden
            else "fewer standbys stream than worker.offsets_wait_for_standbys asks for"
            if self._watch.standbys_short
            else "the standbys lag"
        )
        log.warning("offsets held for %.0fs behind the standbys: %s", held, why)
