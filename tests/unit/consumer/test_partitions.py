"""Read-ahead windows: a hot-lane partition is paused at a small window of its own, so a
worker reads the lane's shared backlog as slots free rather than in bursts."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from tenantq.consumer.partitions import Partitions


class PausingConsumer:
    def __init__(self) -> None:
        self.paused: set[tuple[str, int]] = set()

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused.update((p.topic, p.partition) for p in partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused.difference_update((p.topic, p.partition) for p in partitions)


def test_a_lane_partition_pauses_at_its_own_window_and_a_main_one_at_the_workers() -> None:
    partitions = Partitions(1_000, 10, frozenset({"p.default.lane"}))
    partitions.assigned([TopicPartition("p.default", 0), TopicPartition("p.default.lane", 0)])
    consumer = PausingConsumer()
    for offset in range(10):
        partitions.take("p.default", 0, offset)
        partitions.take("p.default.lane", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused == {("p.default.lane", 0)}
    for offset in range(10, 1_000):
        partitions.take("p.default", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused == {("p.default.lane", 0), ("p.default", 0)}
    for offset in range(5):  # half the lane's window done: it reads again
        partitions.done("p.default.lane", 0, offset)
    partitions.apply_flow_control(consumer)  # type: ignore[arg-type]
    assert consumer.paused == {("p.default", 0)}
