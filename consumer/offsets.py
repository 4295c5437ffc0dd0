"""Per-partition offset bookkeeping: messages finish out of order, the committed offset only
ever moves up to the lowest offset whose job has not reached a durable state."""

from __future__ import annotations

from collections import deque


class PartitionOffsets:
    """Offsets taken from one partition and which of them are durably done.

    ``commit_position`` is what Kafka should store: the next offset to read after a restart,
    i.e. the lowest unfinished offset, or one past the last taken when all are done.
    """

    __slots__ = ("_taken", "_done", "_next", "_timestamps")

    def __init__(self) -> None:
        self._taken: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None
        self._timestamps: dict[int, int] = {}

    def take(self, offset: int, timestamp_ms: int | None = None) -> None:
        if self._taken and offset <= self._taken[-1]:
            # A redelivery after a seek: already tracked.
            return
        self._taken.append(offset)
        if timestamp_ms is not None and timestamp_ms > 0:
            self._timestamps[offset] = timestamp_ms
        self._next = offset + 1 if self._next is None else max(self._next, offset + 1)

    def done(self, offset: int) -> None:
        self._done.add(offset)
        taken, finished = self._taken, self._done
        while taken and taken[0] in finished:
            head = taken.popleft()
            finished.discard(head)
            self._timestamps.pop(head, None)

    @property
    def oldest_timestamp_ms(self) -> int | None:
        """Kafka timestamp of the message at the commit position (the oldest unfinished)."""
        if not self._taken:
            return None
        return self._timestamps.get(self._taken[0])

    @property
    def in_flight(self) -> int:
        """Offsets from the commit position to the last taken (what the commit lags)."""
        return len(self._taken)

    @property
    def unfinished(self) -> int:
        """Of those, the offsets not done."""
        return len(self._taken) - len(self._done)

    @property
    def commit_position(self) -> int | None:
        if self._taken:
            return self._taken[0]
        return self._next
