"""Where a tenant's jobs go: hashed (the default), spread over K keys, pinned, or the hot lane.

* hashed: key = tenant id, partition = Kafka's default partitioner of that key. Every
  producer, in any language, agrees.
* spread K: key = ``tenant#shard`` with the shard drawn per job from the job id, so one hot
  tenant's jobs land on up to K partitions (two shards may hash to the same partition: that is
  the price of staying compatible with the default partitioner).
* pinned: one of an explicit partition list, chosen per job from the job id; key = tenant id.
* lane: the queue's hot lane topic (``<prefix>.<queue>.lane``) instead of the main topic, any
  of its partitions, chosen per job from the job id, so every worker shares the tenant's
  backlog; key = tenant id. A worker puts a tenant there that floods its partition
  (``tenantq.consumer.hot_lane``), or an operator does (``tenantq placement set --lane``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from tenantq.errors import ConfigurationError
from tenantq.partitioner.murmur2 import default_partition

PlacementMode = Literal["hashed", "spread", "pinned", "lane"]
SPREAD_SEPARATOR = "#"
MAX_SPREAD_SHARDS = 1024


@lru_cache(maxsize=1 << 16)
def key_partition(key: str, num_partitions: int) -> int:
    """``default_partition`` of a string key, memoised: murmur2 in Python costs microseconds
    and a producer sees the same few thousand keys over and over."""
    return default_partition(key.encode(), num_partitions)


@dataclass(frozen=True, slots=True)
class Placement:
    """How one tenant's jobs are spread over a queue's partitions."""

    mode: PlacementMode = "hashed"
    shards: int | None = None
    partitions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.mode == "hashed":
            if self.shards is not None or self.partitions:
                raise ConfigurationError("a hashed placement takes neither shards nor partitions")
        elif self.mode == "spread":
            if self.shards is None or not 2 <= self.shards <= MAX_SPREAD_SHARDS:
                raise ConfigurationError(
                    f"a spread placement needs 2..{MAX_SPREAD_SHARDS} shards, got {self.shards}"
                )
            if self.partitions:
                raise ConfigurationError("a spread placement takes no partitions")
        elif self.mode == "pinned":
            if not self.partitions or self.shards is not None:
                raise ConfigurationError("a pinned placement needs partitions and no shards")
            if any(partition < 0 for partition in self.partitions):
                raise ConfigurationError(f"pinned partitions must be >= 0: {self.partitions}")
            if len(set(self.partitions)) != len(self.partitions):
                raise ConfigurationError(f"pinned partitions repeat: {self.partitions}")
        elif self.mode == "lane":
            if self.shards is not None or self.partitions:
                raise ConfigurationError("a lane placement takes neither shards nor partitions")
        else:
            raise ConfigurationError(f"unknown placement mode {self.mode!r}")

    @classmethod
    def spread(cls, shards: int) -> Placement:
        return cls("spread", shards=shards)

    @classmethod
    def pinned(cls, partitions: tuple[int, ...] | list[int]) -> Placement:
        return cls("pinned", partitions=tuple(partitions))

    @classmethod
    def lane(cls) -> Placement:
        return cls("lane")

    @property
    def in_lane(self) -> bool:
        """The tenant's jobs go to the queue's hot lane topic, not its main topic."""
        return self.mode == "lane"

    def check_partition_count(self, num_partitions: int) -> None:
        """Raise ``ConfigurationError`` if a pinned partition does not exist in the topic."""
        missing = [partition for partition in self.partitions if partition >= num_partitions]
        if missing:
            raise ConfigurationError(
                f"pinned partitions {missing} do not exist: the topic has {num_partitions}"
            )

    def choose(self, tenant_id: str, job_id: uuid.UUID, num_partitions: int) -> tuple[str, int]:
        """The partition key and partition of one job of ``tenant_id``."""
        if self.mode == "hashed":
            return tenant_id, key_partition(tenant_id, num_partitions)
        # A UUIDv7 ends in 62 random bits: a fair, reproducible per-job draw.
        draw = job_id.int & 0x3FFF_FFFF_FFFF_FFFF
        if self.mode == "lane":
            return tenant_id, draw % num_partitions
        if self.mode == "spread":
            assert self.shards is not None
            key = f"{tenant_id}{SPREAD_SEPARATOR}{draw % self.shards}"
            return key, key_partition(key, num_partitions)
        self.check_partition_count(num_partitions)
        return tenant_id, self.partitions[draw % len(self.partitions)]

    def describe(self) -> str:
        if self.mode == "spread":
            return f"spread over {self.shards} keys"
        if self.mode == "pinned":
            return "pinned to " + ",".join(str(partition) for partition in self.partitions)
        if self.mode == "lane":
            return "in the hot lane"
        return "hashed"


HASHED = Placement()
LANE = Placement.lane()
