"""The commit position never passes an unfinished offset, whatever order jobs finish in."""

from __future__ import annotations

import random

from tenantq.consumer.offsets import PartitionOffsets


def test_commit_position_is_lowest_unfinished() -> None:
    offsets = PartitionOffsets()
    assert offsets.commit_position is None
    for offset in range(10, 15):
        offsets.take(offset)
    assert offsets.commit_position == 10
    offsets.done(12)
    offsets.done(11)
    assert offsets.commit_position == 10  # 10 still runs
    offsets.done(10)
    assert offsets.commit_position == 13
    offsets.done(13)
    offsets.done(14)
    assert offsets.commit_position == 15  # all done: one past the last taken
    assert offsets.in_flight == 0


def test_random_completion_order_never_commits_past_unfinished() -> None:
    rng = random.Random(7)
    offsets = PartitionOffsets()
    taken = list(range(1000))
    for offset in taken:
        offsets.take(offset)
    order = taken[:]
    rng.shuffle(order)
    finished: set[int] = set()
    for offset in order:
        offsets.done(offset)
        finished.add(offset)
        position = offsets.commit_position
        assert position is not None
        assert all(o in finished for o in range(position))
        assert position == len(taken) or position not in finished


def test_redelivered_offsets_are_not_double_counted() -> None:
    offsets = PartitionOffsets()
    offsets.take(1)
    offsets.take(1)
    assert offsets.in_flight == 1
