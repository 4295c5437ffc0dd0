"""The intake of the hot lane's messages: a partition's messages past its read-ahead window
wait undecoded (the partition paused) until there is room, and a poll's flood is decoded
after the quiet partitions' messages have been dispatched."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from confluent_kafka import TopicPartition
from fakes import FakeConsumer, FakeMessage, FakePublisher, RecordingEvents

import tenantq
from tenantq.consumer.intake import Intake
from tenantq.consumer.partitions import Partitions
from tenantq.consumer.topic_map import TopicMap
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.schemas.envelope import Envelope, encode_envelope

LANE = "p.default.lane"


class Rig:
    """An intake of the hot lane's partitions 0 and 1, built through its constructor: real
    partition bookkeeping; what reaches dispatch, and each pause and resume, recorded."""

    def __init__(self, lane_window: int, events: WorkerEvents | None = None) -> None:
        self.dispatched: list[WorkItem] = []
        self.consumer = FakeConsumer()
        self.partitions = Partitions(1_000, lane_window, frozenset({LANE}))
        self.partitions.assigned([TopicPartition(LANE, 0), TopicPartition(LANE, 1)])
        topics = TopicMap({}, {LANE: ("default", None)}, frozenset({LANE}), frozenset())
        self.intake = Intake(
            settings=tenantq.Settings(),
            topics=topics,
            worker_id="this-worker",
            partitions=self.partitions,
            consumer=self.consumer,  # type: ignore[arg-type]
            publisher=FakePublisher(),
            events=events or WorkerEvents(),
            in_lane=lambda queue, tenant: False,
            find_type=lambda name: None,
            admit=self.dispatched.append,
        )

    @property
    def calls(self) -> list[str]:
        return ["pause"] * len(self.consumer.paused) + ["resume"] * len(self.consumer.resumed)


def lane_records(count: int, partition: int = 0, tenant: str = "acme") -> list[Any]:
    now = dt.datetime.now(dt.UTC)
    return [
        FakeMessage(
            LANE,
            partition,
            offset,
            encode_envelope(Envelope(uuid.uuid4(), "default", "t", tenant, tenant, b"{}", now)),
        )
        for offset in range(count)
    ]


def test_lane_messages_past_the_window_wait_undecoded_until_room() -> None:
    rig = Rig(lane_window=3)
    dispatched, intake, partitions = rig.dispatched, rig.intake, rig.partitions
    intake.take(lane_records(5))
    # Three fill the window; two are held, and the partition stops flowing.
    assert [item.offset for item in dispatched] == [0, 1, 2]
    assert [message.offset for _, message in intake.waiting[(LANE, 0)]] == [3, 4]
    assert rig.calls == ["pause"]
    intake.route_due()
    assert len(dispatched) == 3  # still no room
    partitions.done(LANE, 0, 0, 1)
    intake.route_due()
    assert [item.offset for item in dispatched] == [0, 1, 2, 3] and rig.calls == ["pause"]
    partitions.done(LANE, 0, 1, 1)
    intake.route_due()
    assert [item.offset for item in dispatched] == [0, 1, 2, 3, 4]
    assert rig.calls == ["pause", "resume"] and not intake.waiting
    # The commit position stayed at the first unfinished message all along.
    assert partitions.states[(LANE, 0)].offsets.commit_position == 2


def test_a_window_with_room_routes_every_lane_message() -> None:
    events = RecordingEvents()
    rig = Rig(lane_window=100, events=events)
    read = events.read
    rig.intake.take(lane_records(5))
    assert len(rig.dispatched) == 5 and not rig.intake.waiting and rig.calls == []
    # One report per poll: each message's queue, its source (these are lane records) and its
    # time since the Kafka timestamp (the records say 1 s after the epoch).
    assert len(read) == 1 and [(q, s) for q, s, _ in read[0]] == [("default", "hot_lane")] * 5
    assert all(delay > 1.7e9 for _, _, delay in read[0])


def test_a_flooded_partition_of_a_poll_is_taken_after_the_others() -> None:
    # 100 messages of partition 0 (a flood being read) around 2 of partition 1: those 2 reach
    # dispatch, and the worker's dispatch runs, before any of the flood is decoded.
    rig = Rig(lane_window=1_000)
    flood = lane_records(100, partition=0, tenant="whale")
    quiet = lane_records(2, partition=1, tenant="acme")
    seen_at_dispatch: list[list[str]] = []
    rig.intake.take(
        flood[:50] + quiet[:1] + flood[50:] + quiet[1:],
        between=lambda: seen_at_dispatch.append([item.tenant_id for item in rig.dispatched]),
    )
    assert seen_at_dispatch == [["acme", "acme"]]
    assert [item.offset for item in rig.dispatched if item.tenant_id == "whale"] == list(range(100))
    assert len(rig.dispatched) == 102


def test_a_poll_without_a_flood_is_taken_in_one_pass() -> None:
    rig = Rig(lane_window=1_000)
    calls: list[int] = []
    rig.intake.take(
        lane_records(40, partition=0) + lane_records(40, partition=1),
        between=lambda: calls.append(len(rig.dispatched)),
    )
    assert calls == [] and len(rig.dispatched) == 80
