"""What a dev stack runs: how many Kafka brokers and of which version, whether PostgreSQL has
a streaming standby, and whether both servers ask for TLS and passwords.

A home's topology is recorded in its state file and kept: a plain ``tenantq dev up`` starts
what the home already is, and only an explicit option changes it. The one exception is the
Kafka version of a home that never asked for one: it follows the default, moved on its own
storage as a real cluster is upgraded, so a home made by an older tenantq runs today's broker.
A home made before topologies existed reads as one broker of the version its state file names.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from tenantq.errors import DevStackError

#: The broker version of a new dev home (Kafka 4.x runs on Java 17+).
DEFAULT_KAFKA_VERSION = "4.4.0"
#: The oldest broker the stack writes a configuration for (KRaft with static voters and
#: SCRAM credentials at format time).
OLDEST_KAFKA_VERSION = (3, 9)
#: KRaft voters: an odd number, since an even one survives no more failures than one fewer.
BROKER_COUNTS = (1, 3, 5)
#: The replication factor topics get on a cluster of this many brokers or more.
FULL_REPLICATION = 3


@dataclass(frozen=True)
class Topology:
    """The shape of one dev stack. Every broker is a combined KRaft node (broker and
    controller in one JVM): three JVMs rather than six on a small machine, and a node that
    dies takes a partition leader and a controller voter with it, the harder fault."""

    brokers: int = 1
    standby: bool = False
    secure: bool = False
    kafka_version: str = DEFAULT_KAFKA_VERSION
    #: True once ``--kafka-version`` named the version: the home keeps it until told otherwise.
    kafka_version_pinned: bool = False

    def __post_init__(self) -> None:
        if self.brokers not in BROKER_COUNTS:
            counts = ", ".join(str(count) for count in BROKER_COUNTS)
            raise DevStackError(f"--brokers must be one of {counts}, not {self.brokers}")
        kafka_version_tuple(self.kafka_version)

    @property
    def replication_factor(self) -> int:
        """Replicas of every topic, internal ones included."""
        return min(FULL_REPLICATION, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        """Replicas a write with acks=all waits for: 2 of 3, so one broker may be down."""
        return 2 if self.replication_factor >= FULL_REPLICATION else 1

    @property
    def kafka_major(self) -> int:
        return kafka_version_tuple(self.kafka_version)[0]

    def with_changes(
        self,
        *,
        brokers: int | None = None,
        standby: bool | None = None,
        secure: bool | None = None,
        kafka_version: str | None = None,
    ) -> Topology:
        """This topology with the options that were given (``None``: keep)."""
        changes: dict[str, Any] = {
            name: value
            for name, value in (
                ("brokers", brokers),
                ("standby", standby),
                ("secure", secure),
                ("kafka_version", kafka_version),
            )
            if value is not None
        }
        if kafka_version is not None:
            changes["kafka_version_pinned"] = True
        return replace(self, **changes)

    def following_default(self) -> Topology:
        """This topology on the default Kafka version, unless the version was pinned."""
        if self.kafka_version_pinned or self.kafka_version == DEFAULT_KAFKA_VERSION:
            return self
        return replace(self, kafka_version=DEFAULT_KAFKA_VERSION)

    def upgrades_in_place(self, other: Topology) -> bool:
        """True when ``other`` is this cluster on a newer version of the same major: Kafka's
        brokers start on the older storage (its metadata version stays until finalised), so
        the nodes restart on the new jars and keep their topics."""
        return (
            (self.brokers, self.secure) == (other.brokers, other.secure)
            and self.kafka_major == other.kafka_major
            and kafka_version_tuple(other.kafka_version) > kafka_version_tuple(self.kafka_version)
        )

    def kafka_differs(self, other: Topology) -> bool:
        """True when the brokers of ``other`` need storage formatted anew: a quorum of another
        size, another version, or other listeners and SCRAM credentials."""
        return (self.brokers, self.kafka_version, self.secure) != (
            other.brokers,
            other.kafka_version,
            other.secure,
        )

    def describe_kafka(self) -> str:
        """``"3 brokers of Kafka 4.4.0 over SASL_SSL"``."""
        count = "1 broker" if self.brokers == 1 else f"{self.brokers} brokers"
        listener = "SASL_SSL" if self.secure else "PLAINTEXT"
        return f"{count} of Kafka {self.kafka_version} over {listener}"

    def to_state(self) -> dict[str, Any]:
        """Every field, by name, as the state file records it (``from_state`` reads it)."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Topology | None:
        """The recorded topology; ``None`` for a home that never ran a stack."""
        recorded = state.get("topology")
        if isinstance(recorded, dict):
            return cls(
                brokers=int(recorded.get("brokers", 1)),
                standby=bool(recorded.get("standby", False)),
                secure=bool(recorded.get("secure", False)),
                kafka_version=str(recorded.get("kafka_version", DEFAULT_KAFKA_VERSION)),
                kafka_version_pinned=bool(recorded.get("kafka_version_pinned", False)),
            )
        if "kafka_ports" in state or "postgres_port" in state:
            # A home of the single-broker stack, before topologies were recorded.
            return cls(kafka_version=str(state.get("kafka_version") or DEFAULT_KAFKA_VERSION))
        return None


def kafka_version_tuple(version: str) -> tuple[int, int, int]:
    """``"4.4.0"`` as ``(4, 4, 0)``; a clear error for anything the stack cannot run."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        raise DevStackError(f"Kafka version {version!r} is not of the form MAJOR.MINOR.PATCH")
    parsed = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if parsed[:2] < OLDEST_KAFKA_VERSION:
        oldest = ".".join(str(part) for part in OLDEST_KAFKA_VERSION)
        raise DevStackError(
            f"Kafka {version} is older than the oldest the dev stack runs ({oldest})"
        )
    return parsed
