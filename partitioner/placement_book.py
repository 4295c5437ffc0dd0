"""Producers' cache of the placement table, refreshed every ``placement_ttl_seconds``.

A placement change is data: it takes effect in every producer within one TTL, no deploy, and
at once where a ``PlacementWatcher`` hears of it (``changed``).
When the table cannot be read the book keeps serving what it last loaded (or hashed, before
the first load) and logs it: a misplaced job costs isolation, never correctness, because a
worker runs any tenant from any partition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from tenantq.errors import ConfigurationError
from tenantq.partitioner.placement import HASHED, LANE, Placement

logger = logging.getLogger("tenantq.placement")


class PlacementRow(Protocol):
    """What the book reads of a row of the placement table (the store's ``PlacementRecord``:
    the store lies above the partitioner, so the book names only the fields it uses)."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def shards(self) -> int | None: ...

    @property
    def partitions(self) -> tuple[int, ...]: ...

    @property
    def automatic(self) -> bool: ...


PlacementLoader = Callable[[str], Iterable[PlacementRow]]


def placement_of(record: PlacementRow) -> Placement:
    """A table row as a ``Placement`` (raises ``ConfigurationError`` if it makes no sense)."""
    if record.mode == "spread":
        return Placement.spread(record.shards or 0)
    if record.mode == "pinned":
        return Placement.pinned(record.partitions)
    if record.mode == "hashed":
        return HASHED
    if record.mode == "lane":
        return LANE
    raise ConfigurationError(f"unknown placement mode {record.mode!r} for {record.tenant_id!r}")


@dataclass
class _QueueEntry:
    expires_at: float
    placements: dict[str, Placement]
    #: Tenants whose placement an operator set (a worker never moves them).
    by_operator: frozenset[str] = frozenset()


class PlacementBook:
    """Tenant placements per queue, loaded through ``loader`` and kept ``ttl_seconds``.

    ``clock`` is injectable (a monotonic number of seconds) so tests need not sleep.
    ``refresh_in_background``: a lookup past the TTL answers from the table it has and
    rereads it in a thread of its own, so the caller never waits on the database after the
    first load (the worker's poll thread must not).
    """

    def __init__(
        self,
        loader: PlacementLoader | None,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        refresh_in_background: bool = False,
    ) -> None:
        self._loader = loader
        self._ttl = ttl_seconds
        self._clock = clock
        self._queues: dict[str, _QueueEntry] = {}
        self._lock = threading.Lock()
        self._in_background = refresh_in_background
        #: Queues whose table a background thread is rereading now. Its own lock: ``_lock``
        #: is held for a whole load, which is what the caller must not wait for.
        self._refreshing: set[str] = set()
        self._refreshing_lock = threading.Lock()

    def placement(self, queue: str, tenant_id: str) -> Placement:
        """The placement of ``tenant_id`` in ``queue`` (hashed unless the table says else)."""
        if self._loader is None:
            return HASHED
        return self._entry(queue).placements.get(tenant_id, HASHED)

    @property
    def ttl_seconds(self) -> float:
        return self._ttl

    def placements(self, queue: str) -> dict[str, Placement]:
        """Every tenant of ``queue`` with a placement other than the default."""
        return dict(self._entry(queue).placements)

    def set_by_operator(self, queue: str) -> frozenset[str]:
        """Tenants of ``queue`` whose placement an operator set (``tenantq placement``)."""
        return self._entry(queue).by_operator

    def _entry(self, queue: str) -> _QueueEntry:
        if self._loader is None:
            return _QueueEntry(float("inf"), {})
        entry = self._queues.get(queue)
        if entry is None:
            return self._refresh(queue)
        if self._clock() >= entry.expires_at:
            if not self._in_background:
                return self._refresh(queue)
            self._refresh_in_background(queue)
        return entry

    def _refresh_in_background(self, queue: str) -> None:
        with self._refreshing_lock:
            if queue in self._refreshing:
                return
            self._refreshing.add(queue)

        def refresh() -> None:
            try:
                self._refresh(queue)
            finally:
                with self._refreshing_lock:
                    self._refreshing.discard(queue)

        threading.Thread(target=refresh, name="tenantq-placements", daemon=True).start()

    def changed(self, queue: str | None) -> None:
        """The table changed for ``queue`` (None: maybe for any): reload the queues this book
        serves now, in the calling thread (a watcher's), while lookups keep answering from
        what they have."""
        if self._loader is None:
            return
        for name in [queue] if queue is not None else list(self._queues):
            if name in self._queues:
                self._refresh(name, force=True)

    def invalidate(self, queue: str | None = None) -> None:
        """Forget the cache (of one queue, or all) so the next lookup reloads."""
        with self._lock:
            if queue is None:
                self._queues.clear()
            else:
                self._queues.pop(queue, None)

    def _refresh(self, queue: str, *, force: bool = False) -> _QueueEntry:
        with self._lock:
            now = self._clock()
            entry = self._queues.get(queue)
            if entry is not None and now < entry.expires_at and not force:
                return entry  # another thread refreshed while we waited
            assert self._loader is not None
            try:
                placements = {}
                by_operator = set()
                for record in self._loader(queue):
                    if not record.automatic:
                        by_operator.add(record.tenant_id)
                    try:
                        placements[record.tenant_id] = placement_of(record)
                    except ConfigurationError as error:
                        logger.warning("ignoring placement of %r: %s", record.tenant_id, error)
            except Exception as error:  # the database is down: keep serving, retry after a TTL
                reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                logger.warning("cannot load placements of queue %r: %s", queue, reason)
                placements = entry.placements if entry is not None else {}
                by_operator = set(entry.by_operator) if entry is not None else set()
            entry = _QueueEntry(now + self._ttl, placements, frozenset(by_operator))
            self._queues[queue] = entry
            return entry
