"""Placements: hashed on the tenant key, spread over shard keys, pinned to partitions, and
nonsense refused."""

from __future__ import annotations

import uuid

import pytest

from tenantq.errors import ConfigurationError
from tenantq.partitioner.murmur2 import default_partition
from tenantq.partitioner.placement import HASHED, Placement


def job_ids(count: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=(index * 0x9E3779B97F4A7C15) % (1 << 128)) for index in range(count)]


def test_hashed_placement_uses_the_tenant_key() -> None:
    key, partition = HASHED.choose("acme", uuid.uuid4(), 12)
    assert (key, partition) == ("acme", 0)
    assert HASHED.choose("globex", uuid.uuid4(), 64) == ("globex", 63)


def test_spread_placement_uses_shard_keys() -> None:
    placement = Placement.spread(8)
    chosen = {placement.choose("acme", job_id, 64) for job_id in job_ids(400)}
    keys = {key for key, _ in chosen}
    assert keys == {f"acme#{shard}" for shard in range(8)}
    for key, partition in chosen:
        assert partition == default_partition(key.encode(), 64)
    assert len({partition for _, partition in chosen}) >= 5


def test_spread_is_stable_per_job() -> None:
    placement = Placement.spread(4)
    job_id = uuid.UUID("0190f1c2-7b3a-7def-8abc-0123456789ab")
    assert placement.choose("acme", job_id, 12) == placement.choose("acme", job_id, 12)


def test_pinned_placement_stays_in_its_partitions() -> None:
    placement = Placement.pinned([2, 5, 7])
    chosen = [placement.choose("acme", job_id, 12) for job_id in job_ids(300)]
    assert {key for key, _ in chosen} == {"acme"}
    assert {partition for _, partition in chosen} == {2, 5, 7}


def test_pinned_placement_beyond_the_topic_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match=r"pinned partitions \[12\] do not exist"):
        Placement.pinned([1, 12]).choose("acme", uuid.uuid4(), 12)


@pytest.mark.parametrize(
    "arguments",
    [
        {"mode": "spread", "shards": 1},
        {"mode": "spread", "shards": None},
        {"mode": "pinned", "partitions": ()},
        {"mode": "pinned", "partitions": (1, 1)},
        {"mode": "pinned", "partitions": (-1,)},
        {"mode": "hashed", "shards": 3},
        {"mode": "striped"},
    ],
)
def test_nonsense_placements_are_refused(arguments: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Placement(**arguments)  # type: ignore[arg-type]
