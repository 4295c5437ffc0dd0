"""The passwords of a secure dev stack: generated once per home, kept in its state file
(owner-only), never written to a log or an error message."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Credentials:
    """The SCRAM passwords of the brokers' own user and of the client user, and the password
    of PostgreSQL's superuser. Hex only: no character needs quoting in a JAAS line, a
    ``--add-scram`` argument, a URL or a libpq connection string."""

    kafka_broker_password: str
    kafka_client_password: str
    postgres_password: str

    def __repr__(self) -> str:
        return "Credentials(***)"

    @property
    def all(self) -> tuple[str, ...]:
        return (self.kafka_broker_password, self.kafka_client_password, self.postgres_password)

    @classmethod
    def generate(cls) -> Credentials:
        return cls(*(secrets.token_hex(16) for _ in range(3)))

    def to_state(self) -> dict[str, str]:
        """Every password, by field name, as the state file records them."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Credentials | None:
        recorded = state.get("secrets")
        if not isinstance(recorded, dict):
            return None
        try:
            return cls(
                kafka_broker_password=str(recorded["kafka_broker_password"]),
                kafka_client_password=str(recorded["kafka_client_password"]),
                postgres_password=str(recorded["postgres_password"]),
            )
        except KeyError:
            return None


def redact(text: str, secret_values: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for value in secret_values:
        if value:
            text = text.replace(value, "***")
    return text
