"""The secure stack's passwords: random per home, stored and read back, never shown."""

from __future__ import annotations

from tenantq.devstack.secrets import Credentials, redact


def test_credentials_are_random_hex_and_round_trip_through_the_state() -> None:
    first, second = Credentials.generate(), Credentials.generate()
    assert first != second
    assert all(len(value) == 32 and int(value, 16) >= 0 for value in first.all)
    assert Credentials.from_state({"secrets": first.to_state()}) == first
    assert Credentials.from_state({}) is None
    assert Credentials.from_state({"secrets": {"postgres_password": "x"}}) is None


def test_neither_repr_nor_an_error_shows_a_password() -> None:
    credentials = Credentials.generate()
    assert not any(value in repr(credentials) for value in credentials.all)
    message = f"format failed: [name=broker,password={credentials.kafka_broker_password}]"
    assert redact(message, credentials.all) == "format failed: [name=broker,password=***]"
