"""The dev stack's state file (``<dev_home>/state.json``): what runs where.

Settings read ``kafka_bootstrap_servers``, ``kafka_config`` and ``database_url`` from it when
the environment names no servers. The nodes are recorded in ``kafka_nodes`` and
``postgres_nodes``; the keys of the single-server stack (``kafka_pid``, ``kafka_ports``,
``postgres_pid``, ``postgres_port``) are still written, for node 1 and the primary, since
scripts read them. A state file written before nodes were recorded reads as one node each.
The file holds a secure stack's passwords, so only its owner may read it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tenantq.devstack.kafka_config import KafkaNode

PRIMARY = "primary"
STANDBY = "standby"


@dataclass(frozen=True)
class PostgresNode:
    """One PostgreSQL server: ``a`` or ``b``, its port, whether it is the primary or a
    standby, and whether its data must be cloned from the primary before it starts (a new
    standby, or a primary that a failover left behind)."""

    name: str
    port: int
    role: str
    needs_clone: bool = False


def read_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace the state file atomically, owner-only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(json.dumps(state, indent=2, sort_keys=True))
    temporary.chmod(0o600)
    temporary.replace(path)


# -- Kafka -------------------------------------------------------------------------------------


def kafka_nodes(state: dict[str, Any]) -> list[KafkaNode]:
    recorded = state.get("kafka_nodes")
    if isinstance(recorded, list):
        return [
            KafkaNode(int(n["node_id"]), int(n["client_port"]), int(n["controller_port"]))
            for n in recorded
        ]
    ports = state.get("kafka_ports")
    if isinstance(ports, list) and len(ports) == 2:
        return [KafkaNode(1, int(ports[0]), int(ports[1]))]
    return []


def kafka_pids(state: dict[str, Any]) -> dict[int, int]:
    """The recorded pid of each node id."""
    recorded = state.get("kafka_nodes")
    if isinstance(recorded, list):
        return {int(n["node_id"]): int(n["pid"]) for n in recorded if n.get("pid")}
    if state.get("kafka_pid"):
        return {1: int(state["kafka_pid"])}
    return {}


def record_kafka(state: dict[str, Any], nodes: list[KafkaNode], pids: dict[int, int]) -> None:
    from tenantq.devstack.kafka_config import bootstrap_servers

    state["kafka_nodes"] = [{**asdict(node), "pid": pids.get(node.node_id)} for node in nodes]
    state["kafka_bootstrap_servers"] = bootstrap_servers(nodes)
    first = nodes[0]
    state["kafka_ports"] = [first.client_port, first.controller_port]
    state["kafka_pid"] = pids.get(first.node_id)


# -- PostgreSQL --------------------------------------------------------------------------------


def postgres_nodes(state: dict[str, Any]) -> list[PostgresNode]:
    recorded = state.get("postgres_nodes")
    if isinstance(recorded, list):
        return [
            PostgresNode(
                name=str(n["name"]),
                port=int(n["port"]),
                role=str(n["role"]),
                needs_clone=bool(n.get("needs_clone", False)),
            )
            for n in recorded
        ]
    if state.get("postgres_port"):
        return [PostgresNode("a", int(state["postgres_port"]), PRIMARY)]
    return []


def record_postgres(
    state: dict[str, Any], nodes: list[PostgresNode], pids: Mapping[str, int | None]
) -> None:
    state["postgres_nodes"] = [{**asdict(node), "pid": pids.get(node.name)} for node in nodes]
    primary = next((node for node in nodes if node.role == PRIMARY), None)
    if primary is not None:
        state["postgres_port"] = primary.port
        state["postgres_pid"] = pids.get(primary.name)


def postgres_pids(state: dict[str, Any]) -> dict[str, int]:
    recorded = state.get("postgres_nodes")
    if isinstance(recorded, list):
        return {str(n["name"]): int(n["pid"]) for n in recorded if n.get("pid")}
    if state.get("postgres_pid"):
        return {"a": int(state["postgres_pid"])}
    return {}
