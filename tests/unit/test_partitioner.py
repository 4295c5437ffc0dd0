"""murmur2 against the Java client, placements, tenant ids and the placement cache."""

from __future__ import annotations

import uuid

import pytest
from tenantq.errors import ConfigurationError, InvalidTenantId
from tenantq.partitioner.murmur2 import default_partition, murmur2, to_positive
from tenantq.partitioner.placement import HASHED, Placement, key_partition
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.partitioner.tenant_id import validate_tenant_id
from tenantq.store.placement import PlacementRecord

PARTITION_COUNTS = (1, 3, 12, 64, 1000)

# Computed with org.apache.kafka.common.utils.Utils from kafka-clients 4.1.1:
# (key, Utils.murmur2(utf8), toPositive(murmur2) % n for each n in PARTITION_COUNTS).
# The first six are also the vectors of Kafka's own UtilsTest.testMurmur2.
JAVA_VECTORS = [
    ("21", -973932308, (0, 0, 0, 44, 340)),
    ("foobar", -790332482, (0, 0, 6, 62, 166)),
    ("a-little-bit-long-string", -985981536, (0, 2, 8, 32, 112)),
    ("a-little-bit-longer-string", -1486304829, (0, 2, 11, 3, 819)),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, (0, 2, 5, 13, 677)),
    ("abc", 479470107, (0, 0, 3, 27, 107)),
    ("", 275646681, (0, 0, 9, 25, 681)),
    ("a", -1563381124, (0, 1, 4, 60, 524)),
    ("ab", 316155434, (0, 2, 2, 42, 434)),
    ("acme", -1281648380, (0, 0, 0, 4, 268)),
    ("acme#0", 909394176, (0, 0, 0, 0, 176)),
    ("acme#1", 1368687356, (0, 2, 8, 60, 356)),
    ("acme#7", -577025315, (0, 0, 9, 29, 333)),
    ("tenant-\u00e9\u00e8", -1685659003, (0, 1, 1, 5, 645)),
    ("globex", -1404328321, (0, 1, 7, 63, 327)),
]


@pytest.mark.parametrize(("key", "expected_hash", "expected_partitions"), JAVA_VECTORS)
def test_murmur2_matches_the_java_client(
    key: str, expected_hash: int, expected_partitions: tuple[int, ...]
) -> None:
    assert murmur2(key.encode()) == expected_hash
    partitions = tuple(default_partition(key.encode(), n) for n in PARTITION_COUNTS)
    assert partitions == expected_partitions
    assert tuple(key_partition(key, n) for n in PARTITION_COUNTS) == expected_partitions


def test_murmur2_of_every_byte_value() -> None:
    # Java: Utils.murmur2(new byte[]{0, 1, ..., 255}); bytes >= 0x80 are negative in Java.
    assert murmur2(bytes(range(256))) == -1948347274


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF


def test_default_partition_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError):
        default_partition(b"x", 0)


@pytest.mark.parametrize("tenant", ["a", "acme", "A.b_c:d-9", "x" * 128])
def test_valid_tenant_ids(tenant: str) -> None:
    assert validate_tenant_id(tenant) == tenant


@pytest.mark.parametrize(
    ("tenant", "message"),
    [
        ("", "empty"),
        ("x" * 129, "129 characters, the limit is 128"),
        ("acme#1", "character '#' at position 4"),
        ("ac me", "character ' ' at position 2"),
        ("caf\u00e9", "character '\u00e9'"),
        (None, "must be a string"),
        (42, "must be a string"),
    ],
)
def test_invalid_tenant_ids(tenant: object, message: str) -> None:
    with pytest.raises(InvalidTenantId, match=message):
        validate_tenant_id(tenant)


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


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TableLoader:
    """An in-memory placement table standing in for the database."""

    def __init__(self) -> None:
        self.rows: dict[str, PlacementRecord] = {}
        self.loads = 0
        self.failing = False

    def __call__(self, queue: str) -> list[PlacementRecord]:
        self.loads += 1
        if self.failing:
            raise OSError("database unavailable")
        return [row for row in self.rows.values() if row.queue == queue]


def test_book_caches_for_the_ttl_then_reloads() -> None:
    clock, table = FakeClock(), TableLoader()
    table.rows["acme"] = PlacementRecord("default", "acme", "spread", 4, ())
    book = PlacementBook(table, ttl_seconds=5.0, clock=clock)
    assert book.placement("default", "acme") == Placement.spread(4)
    assert book.placement("default", "globex") is HASHED
    table.rows["acme"] = PlacementRecord("default", "acme", "pinned", None, (3,))
    clock.now += 4.9
    assert book.placement("default", "acme") == Placement.spread(4)
    assert table.loads == 1
    clock.now += 0.2
    assert book.placement("default", "acme") == Placement.pinned([3])
    assert table.loads == 2


def test_book_keeps_serving_when_the_table_cannot_be_read() -> None:
    clock, table = FakeClock(), TableLoader()
    table.rows["acme"] = PlacementRecord("default", "acme", "pinned", None, (1, 2))
    book = PlacementBook(table, ttl_seconds=1.0, clock=clock)
    assert book.placement("default", "acme") == Placement.pinned([1, 2])
    table.failing = True
    clock.now += 2
    assert book.placement("default", "acme") == Placement.pinned([1, 2])
    fresh = PlacementBook(table, ttl_seconds=1.0, clock=clock)
    assert fresh.placement("default", "acme") is HASHED


def test_book_skips_a_bad_row_and_keeps_the_others() -> None:
    table = TableLoader()
    table.rows["bad"] = PlacementRecord("default", "bad", "spread", 1, ())
    table.rows["good"] = PlacementRecord("default", "good", "spread", 3, ())
    book = PlacementBook(table, ttl_seconds=1.0, clock=FakeClock())
    assert book.placement("default", "bad") is HASHED
    assert book.placement("default", "good") == Placement.spread(3)


def test_book_without_a_loader_is_hashed() -> None:
    assert PlacementBook(None, ttl_seconds=1.0).placement("default", "acme") is HASHED
