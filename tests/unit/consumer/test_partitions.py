"""Read-ahead windows: a hot-lane partition is paused at a small window of its own, so a
worker reads the lane's shared backlog as slots free rather than in bursts. Offsets: an answer
about a message read under an earlier assignment of a partition never moves a later one's
commit position."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from fakes import FakeConsumer

from tenantq.consumer.partitions import Partitions


def test_a_lane_partition_pauses_at_its_own_window_and_a_main_one_at_the_workers() -> None:
    partitions = Partitions(1_000, 10, frozenset({"p.default.lane"}))
    partitions.assigned([TopicPartition("p.default", 0), TopicPartition("p.default.lane", 0)])
    consumer = FakeConsumer()
    for offset in range(10):
        partitions.take("p.default", 0, offset)
        lane_epoch = partitions.take("p.default.lane", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {("p.default.lane", 0)}
    for offset in range(10, 1_000):
        partitions.take("p.default", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {("p.default.lane", 0), ("p.default", 0)}
    for offset in range(5):  # half the lane's window done: it reads again
        partitions.done("p.default.lane", 0, offset, lane_epoch)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {("p.default", 0)}


def commit_position(partitions: Partitions) -> int | None:
    return partitions.states[("p.default", 0)].offsets.commit_position


def test_done_from_an_earlier_assignment_does_not_move_the_new_one() -> None:
    partitions = Partitions(1_000)
    main = TopicPartition("p.default", 0)
    partitions.assigned([main])
    first = partitions.take("p.default", 0, 7)
    partitions.mark_revoked({("p.default", 0)})
    partitions.forget({("p.default", 0)})
    # Given back to this worker: read again from the commit, offset 5 on.
    partitions.assigned([main])
    second = partitions.take("p.default", 0, 5)
    assert second and second != first
    # The earlier assignment's message at 7 is answered now: 7 is not done in this one.
    partitions.done("p.default", 0, 7, first)
    for offset in (6, 7):
        partitions.take("p.default", 0, offset)
    partitions.done("p.default", 0, 5, second)
    partitions.done("p.default", 0, 6, second)
    assert commit_position(partitions) == 7


def test_a_partition_named_again_while_owned_keeps_its_unfinished_offsets() -> None:
    partitions = Partitions(1_000)
    main = TopicPartition("p.default", 0)
    partitions.assigned([main])
    epoch = partitions.take("p.default", 0, 3)
    partitions.take("p.default", 0, 4)
    assert partitions.assigned([main, TopicPartition("p.default", 1)]) == [
        TopicPartition("p.default", 1)
    ]
    partitions.done("p.default", 0, 4, epoch)
    assert commit_position(partitions) == 3
    partitions.done("p.default", 0, 3, epoch)
    assert commit_position(partitions) == 5


def test_a_revoked_partition_takes_nothing() -> None:
    partitions = Partitions(1_000)
    partitions.assigned([TopicPartition("p.default", 0)])
    partitions.mark_revoked({("p.default", 0)})
    assert partitions.take("p.default", 0, 1) == 0


def test_store_sends_only_the_partitions_whose_position_moved() -> None:
    partitions = Partitions(1_000)
    partitions.assigned([TopicPartition("p.default", n) for n in range(3)])
    consumer = FakeConsumer()
    epochs = {n: partitions.take("p.default", n, 10) for n in range(3)}
    partitions.store(consumer)  # type: ignore[arg-type]
    assert consumer.stored == [[("p.default", 0, 10), ("p.default", 1, 10), ("p.default", 2, 10)]]
    partitions.store(consumer)  # type: ignore[arg-type]
    assert len(consumer.stored) == 1  # nothing moved: no call at all
    partitions.done("p.default", 1, 10, epochs[1])
    partitions.store(consumer)  # type: ignore[arg-type]
    assert consumer.stored[-1] == [("p.default", 1, 11)]


def test_a_waiting_partition_whose_window_filled_is_paused_once_its_wait_ends() -> None:
    partitions = Partitions(4)
    partitions.assigned([TopicPartition("p.default.retry.0", 0)])
    consumer = FakeConsumer()
    for offset in range(4):
        partitions.take("p.default.retry.0", 0, offset)
    partitions.pause_waiting(consumer, "p.default.retry.0", 0)  # type: ignore[arg-type]
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {("p.default.retry.0", 0)}  # waiting, not full-paused
    partitions.resume_due(consumer, "p.default.retry.0", 0)  # type: ignore[arg-type]
    assert consumer.paused_now == set()
    # Nothing was taken or done since: flow control must still see the full window.
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {("p.default.retry.0", 0)}


def test_main_partitions_share_a_budget_and_pause_only_past_twice_their_share() -> None:
    """Three main-topic partitions, a window of 100 each: a budget of 300. One busy alone has
    the three windows as its share and is paused past twice that (600), resumed at 300; with
    two busy the share is 150 (paused at 300, resumed at 150); with three, 100 (paused at
    200). The worker may read what the budget leaves. A retry tier keeps its own window."""
    main = "p.default"
    partitions = Partitions(100, 10, frozenset({"p.default.lane"}), frozenset({main}))
    partitions.assigned(
        [TopicPartition(main, n) for n in range(3)] + [TopicPartition("p.default.retry.0", 0)]
    )
    consumer = FakeConsumer()
    epoch = 0
    for offset in range(599):
        epoch = partitions.take(main, 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert partitions.main_window() == 300
    assert consumer.paused_now == set()
    assert partitions.read_room() == 0  # 599 taken of a budget of 300
    partitions.take(main, 0, 599)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {(main, 0)}
    # Another partition gets busy: two share 300, 150 each; paused until 150 in flight.
    partitions.take(main, 1, 0)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert partitions.main_window() == 150
    for offset in range(449):
        partitions.done(main, 0, offset, epoch)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == {(main, 0)}  # 151 in flight
    partitions.done(main, 0, 449, epoch)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused_now == set()
    assert partitions.read_room() == 300 - 151
    # All three busy: a share of 100 each, paused at 200.
    partitions.take(main, 2, 0)
    for offset in range(600, 650):
        partitions.take(main, 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert partitions.main_window() == 100
    assert consumer.paused_now == {(main, 0)}  # 200 in flight
    assert partitions.read_room() == 300 - 202
    # A retry tier's partition is no part of the budget: paused at its own window.
    for offset in range(100):
        partitions.take("p.default.retry.0", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert ("p.default.retry.0", 0) in consumer.paused_now
    assert partitions.read_room() == 300 - 202
