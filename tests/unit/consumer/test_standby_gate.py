"""Offsets behind the standbys: a commit position is stored only once a reading of the primary
taken after it has had its WAL flushed by the standbys; a new timeline stops every store until
the worker has read its partitions again."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from confluent_kafka import TopicPartition
from fakes import FakeClock, FakeConsumer

from tenantq.consumer.partitions import Partitions
from tenantq.consumer.standby_gate import StandbyGate, StandbyWatch
from tenantq.store.replication import ReplicationPosition

MAIN = "p.default"


def position(written: int, flushed: int | None, timeline: int = 1) -> ReplicationPosition:
    return ReplicationPosition(timeline, written, flushed, hidden=0)


class Connections:
    """Stands in for ``LazyConnection``: counts the connections opened and closed."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.open = False

    def get(self) -> Any:
        if not self.open:
            self.opened += 1
            self.open = True
        return object()

    def close(self) -> None:
        if self.open:
            self.closed += 1
        self.open = False


def watch(clock: FakeClock) -> StandbyWatch:
    def unreadable(connection: Any) -> ReplicationPosition:
        raise AssertionError("the tests give readings by hand")

    return StandbyWatch(Connections(), unreadable, clock=clock)  # type: ignore[arg-type]


def gated(clock: FakeClock) -> tuple[StandbyWatch, StandbyGate, Partitions, FakeConsumer]:
    the_watch = watch(clock)
    partitions = Partitions(1_000, commit_stored_only=True)
    partitions.assigned([TopicPartition(MAIN, 0), TopicPartition(MAIN, 1)])
    consumer = FakeConsumer()
    gate = StandbyGate(the_watch, partitions, consumer, clock=clock)  # type: ignore[arg-type]
    return the_watch, gate, partitions, consumer


def finish(partitions: Partitions, partition: int, *offsets: int) -> None:
    for offset in offsets:
        epoch = partitions.take(MAIN, partition, offset)
        partitions.done(MAIN, partition, offset, epoch)


def test_a_position_is_stored_once_a_later_reading_is_flushed_by_the_standbys() -> None:
    clock = FakeClock(100.0)
    the_watch, gate, partitions, consumer = gated(clock)
    the_watch.note(99.0, position(written=1_000, flushed=1_000))
    finish(partitions, 0, 0, 1, 2)
    clock.now = 100.5
    assert gate.store()
    assert consumer.stored == []  # the only reading is older than the positions
    the_watch.note(101.0, position(written=2_000, flushed=1_500))
    assert gate.store()
    assert consumer.stored == []  # a later reading, its WAL not flushed yet
    the_watch.note(101.1, position(written=2_100, flushed=2_000))
    assert gate.store()
    assert consumer.stored == [[(MAIN, 0, 3)]]
    assert gate.holding == 0


def test_positions_that_move_meanwhile_wait_for_their_own_reading() -> None:
    clock = FakeClock(10.0)
    the_watch, gate, partitions, consumer = gated(clock)
    finish(partitions, 0, 0)
    gate.store()
    clock.now = 11.0
    the_watch.note(10.5, position(written=500, flushed=None))
    finish(partitions, 0, 1)
    finish(partitions, 1, 0)
    gate.store()
    the_watch.note(10.6, position(written=600, flushed=500))  # covers the reading at 10.5
    gate.store()
    assert consumer.stored == [[(MAIN, 0, 1)]]
    the_watch.note(11.5, position(written=700, flushed=700))
    gate.store()
    assert consumer.stored[-1] == [(MAIN, 0, 2), (MAIN, 1, 1)]


def test_fewer_standbys_than_asked_for_hold_every_position() -> None:
    clock = FakeClock(10.0)
    the_watch, gate, partitions, consumer = gated(clock)
    finish(partitions, 0, 0, 1)
    gate.store()
    for step in range(1, 20):
        the_watch.note(10.0 + step, position(written=100 * step, flushed=None))
        assert gate.store()
    assert consumer.stored == []
    assert the_watch.standbys_short
    assert not gate.settle(0.0)


def test_a_new_timeline_stops_the_stores_until_the_partitions_are_read_again() -> None:
    clock = FakeClock(10.0)
    the_watch, gate, partitions, consumer = gated(clock)
    the_watch.note(9.0, position(written=100, flushed=100))
    finish(partitions, 0, 0)
    clock.now = 10.5
    the_watch.note(10.2, position(written=900, flushed=None, timeline=1))
    assert gate.store()
    # The failover: the new primary's first reading, already flushed by a new standby.
    the_watch.note(12.0, position(written=800, flushed=800, timeline=2))
    assert gate.failed_over
    assert not gate.store()
    assert not gate.settle(1.0)
    assert consumer.stored == []  # the position kept before the failover is never stored
    gate.rewound()
    assert not gate.failed_over
    finish(partitions, 1, 0, 1)
    clock.now = 13.0
    gate.store()
    the_watch.note(13.5, position(written=1_000, flushed=1_000, timeline=2))
    assert gate.store()
    assert consumer.stored == [[(MAIN, 1, 2)]]


def test_a_position_of_a_partition_given_up_meanwhile_is_not_stored() -> None:
    clock = FakeClock(10.0)
    the_watch, gate, partitions, consumer = gated(clock)
    finish(partitions, 0, 0, 1)
    gate.store()
    partitions.mark_revoked({(MAIN, 0)})
    partitions.forget({(MAIN, 0)})
    partitions.assigned([TopicPartition(MAIN, 0)])  # back, under a new assignment
    the_watch.note(11.0, position(written=10, flushed=10))
    gate.store()
    assert consumer.stored == []


def test_the_watch_reads_again_after_a_failed_reading_on_a_new_connection() -> None:
    clock = FakeClock(0.0)
    readings: list[Any] = [psycopg.OperationalError("gone"), position(written=5, flushed=5)]
    connections = Connections()

    def read(connection: Any) -> ReplicationPosition:
        answer = readings.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    the_watch = StandbyWatch(connections, read, clock=clock)  # type: ignore[arg-type]
    assert not the_watch.run_round()
    clock.now = 1.0
    assert the_watch.run_round()
    assert (connections.opened, connections.closed) == (2, 1)  # the failed one was dropped
    assert the_watch.reading() == (0, 1.0)


@pytest.mark.parametrize("stored_only", [False, True])
def test_commit_sends_the_stored_position_when_the_gate_holds_the_latest(
    stored_only: bool,
) -> None:
    committed: list[list[tuple[str, int, int]]] = []

    class Committing(FakeConsumer):
        def commit(self, offsets: list[Any], asynchronous: bool) -> None:
            committed.append(sorted((p.topic, p.partition, p.offset) for p in offsets))

    partitions = Partitions(1_000, commit_stored_only=stored_only)
    partitions.assigned([TopicPartition(MAIN, 0)])
    consumer = Committing()
    finish(partitions, 0, 0, 1)
    partitions.store_positions(consumer, partitions.moved_positions())  # type: ignore[arg-type]
    finish(partitions, 0, 2, 3)
    partitions.moved_positions()  # offered to the gate, not stored
    partitions.commit(consumer, None, timeout=None)  # type: ignore[arg-type]
    assert committed == [[(MAIN, 0, 2 if stored_only else 4)]]
