"""Kafka's default partitioner hash, byte-for-byte the Java client's ``Utils.murmur2``.

Producers in any language must agree on where a key goes; librdkafka calls this partitioner
``murmur2_random``. The unit tests pin the results computed by the Java client itself.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_MULTIPLIER = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32-bit, Kafka's seed) of ``data`` as a signed 32-bit int, as Java returns it."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    # Java reads each 4-byte block little-endian; int arithmetic wraps at 32 bits.
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _MULTIPLIER) & _MASK
        k ^= k >> 24
        k = (k * _MULTIPLIER) & _MASK
        h = ((h * _MULTIPLIER) & _MASK) ^ k
    rest = length % 4
    if rest:
        # Java's fall-through switch over the 1-3 trailing bytes.
        if rest == 3:
            h ^= data[whole + 2] << 16
        if rest >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _MULTIPLIER) & _MASK
    h ^= h >> 13
    h = (h * _MULTIPLIER) & _MASK
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clears the sign bit (not ``abs``, which breaks on MIN_VALUE)."""
    return value & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner gives a keyed record."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
