"""A home's topology: defaults, what options change, what a pre-topology state file reads
as, and the shapes refused."""

from __future__ import annotations

import pytest

from tenantq.devstack.topology import DEFAULT_KAFKA_VERSION, Topology, kafka_version_tuple
from tenantq.errors import DevStackError


def test_a_new_home_is_one_plaintext_broker_of_the_default_version() -> None:
    topology = Topology()
    assert (topology.brokers, topology.standby, topology.secure) == (1, False, False)
    assert topology.kafka_version == DEFAULT_KAFKA_VERSION == "4.4.0"
    assert (topology.replication_factor, topology.min_insync_replicas) == (1, 1)
    assert (Topology(brokers=3).replication_factor, Topology(brokers=3).min_insync_replicas) == (
        3,
        2,
    )
    assert Topology(brokers=5).replication_factor == 3


def test_options_change_only_what_they_name() -> None:
    recorded = Topology(brokers=3, standby=True)
    assert recorded.with_changes() == recorded
    assert recorded.with_changes(secure=True) == Topology(brokers=3, standby=True, secure=True)
    assert recorded.with_changes(standby=False).brokers == 3
    assert not recorded.kafka_differs(recorded.with_changes(standby=False))
    assert recorded.kafka_differs(recorded.with_changes(kafka_version="3.9.1"))
    assert recorded.kafka_differs(recorded.with_changes(brokers=1))
    assert recorded.kafka_differs(recorded.with_changes(secure=True))


def test_the_state_file_round_trips_and_an_old_one_reads_as_one_broker() -> None:
    topology = Topology(brokers=3, standby=True, secure=True, kafka_version="3.9.1")
    assert Topology.from_state({"topology": topology.to_state()}) == topology
    old = {"kafka_ports": [19092, 19093], "postgres_port": 15432, "kafka_version": "4.1.1"}
    assert Topology.from_state(old) == Topology(kafka_version="4.1.1")
    assert Topology.from_state({}) is None


@pytest.mark.parametrize("brokers", [0, 2, 4, 7])
def test_an_even_or_empty_quorum_is_refused(brokers: int) -> None:
    with pytest.raises(DevStackError, match="--brokers must be one of 1, 3, 5"):
        Topology(brokers=brokers)


@pytest.mark.parametrize(
    ("version", "message"),
    [("4.4", "MAJOR.MINOR.PATCH"), ("latest", "MAJOR.MINOR.PATCH"), ("3.8.1", "older than")],
)
def test_a_version_the_stack_cannot_run_is_refused(version: str, message: str) -> None:
    with pytest.raises(DevStackError, match=message):
        Topology(kafka_version=version)


def test_versions_parse() -> None:
    assert kafka_version_tuple("3.9.1") == (3, 9, 1)
    assert Topology(kafka_version="3.9.1").kafka_major == 3


def test_the_brokers_are_described_in_one_phrase() -> None:
    assert Topology().describe_kafka() == "1 broker of Kafka 4.4.0 over PLAINTEXT"
    secure = Topology(brokers=3, secure=True, kafka_version="3.9.1")
    assert secure.describe_kafka() == "3 brokers of Kafka 3.9.1 over SASL_SSL"


def test_a_home_that_never_named_a_version_follows_the_default() -> None:
    old_home = {"kafka_ports": [19092, 19093], "postgres_port": 15432, "kafka_version": "4.1.1"}
    recorded = Topology.from_state(old_home)
    assert recorded is not None and not recorded.kafka_version_pinned
    moved = recorded.with_changes().following_default()
    assert moved.kafka_version == DEFAULT_KAFKA_VERSION
    assert recorded.upgrades_in_place(moved)
    assert not recorded.kafka_differs(moved.with_changes(kafka_version="4.1.1"))


def test_a_version_named_once_is_kept() -> None:
    pinned = Topology().with_changes(kafka_version="4.1.1")
    assert pinned.kafka_version_pinned
    again = Topology.from_state({"topology": pinned.to_state()})
    assert again == pinned
    assert again.with_changes(brokers=3).following_default().kafka_version == "4.1.1"


def test_only_a_newer_version_of_the_same_shape_and_major_upgrades_in_place() -> None:
    old = Topology(kafka_version="4.1.1")
    assert old.upgrades_in_place(Topology(kafka_version="4.4.0"))
    assert not Topology(kafka_version="4.4.0").upgrades_in_place(old)
    assert not old.upgrades_in_place(Topology(kafka_version="4.1.1"))
    assert not old.upgrades_in_place(Topology(brokers=3, kafka_version="4.4.0"))
    assert not old.upgrades_in_place(Topology(secure=True, kafka_version="4.4.0"))
    assert not Topology(kafka_version="3.9.1").upgrades_in_place(old)
