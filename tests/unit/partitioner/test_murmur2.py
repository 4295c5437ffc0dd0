"""murmur2 and the default partition, against the Java client."""

from __future__ import annotations

import pytest

from tenantq.partitioner.murmur2 import default_partition, murmur2, to_positive
from tenantq.partitioner.placement import key_partition

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
