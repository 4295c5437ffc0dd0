"""What ``tenantq dev status`` reports: one entry per server process of the stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KAFKA = "kafka"
POSTGRES = "postgres"


@dataclass(frozen=True)
class ServerProcess:
    """One server process. ``server`` is ``kafka`` or ``postgres``; ``role`` is
    ``broker+controller`` (a combined KRaft node), ``primary`` or ``standby`` (read from the
    server when it answers), or ``external`` for a server the environment names; ``node``
    names it in the stack (a Kafka node id, PostgreSQL ``a`` or ``b``); ``pid`` is ``None``
    when it is not running or not the stack's."""

    server: str
    role: str
    node: str
    pid: int | None
    endpoint: str
    running: bool
    healthy: bool
    managed: bool = True
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The entry of ``tenantq dev status --json``."""
        return {
            "server": self.server,
            "role": self.role,
            "node": self.node,
            "pid": self.pid,
            "endpoint": self.endpoint,
            "running": self.running,
            "healthy": self.healthy,
            "managed": self.managed,
            **self.extra,
        }


@dataclass(frozen=True)
class StackStatus:
    processes: list[ServerProcess]

    @property
    def healthy(self) -> bool:
        return bool(self.processes) and all(process.healthy for process in self.processes)

    def of(self, server: str) -> list[ServerProcess]:
        return [process for process in self.processes if process.server == server]
