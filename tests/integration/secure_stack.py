"""The secure stack (Kafka over SASL_SSL with SCRAM-SHA-512, PostgreSQL over TLS with a
password) that the security tests run on: the one ``make test-secure`` runs the suite on
when the environment names it (``TENANTQ_DEV_HOME`` records a secure topology whose servers
run), else one of the test module's own, down at the end."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from topology_stack import TopologyStack, topology_stack

import tenantq
from tenantq.devstack.processes import pid_alive
from tenantq.devstack.stack import DevStack
from tenantq.devstack.state import kafka_pids, postgres_pids
from tenantq.devstack.topology import Topology


def environment_secure_home() -> Path | None:
    """The home of the secure stack the environment names, if its servers run."""
    value = os.environ.get("TENANTQ_DEV_HOME")
    if not value:
        return None
    state = DevStack(Path(value)).read_state()
    topology = Topology.from_state(state)
    if topology is None or not topology.secure:
        return None
    pids = [*kafka_pids(state).values(), *postgres_pids(state).values()]
    if not pids or not all(pid and pid_alive(pid) for pid in pids):
        return None
    return Path(value)


@contextlib.contextmanager
def secure_stack() -> Iterator[TopologyStack]:
    """A running secure stack: the environment's, or a new one taken down on exit."""
    home = environment_secure_home()
    if home is not None:
        yield TopologyStack(home, secure=True)
        return
    with topology_stack(secure=True) as stack:
        yield stack


def passwords(stack: TopologyStack) -> list[str]:
    """Every secret of the stack: the SCRAM password clients use, the PostgreSQL password,
    and the broker's own."""
    secrets = list(stack.state["secrets"].values())
    assert len(secrets) >= 2 and all(len(secret) >= 16 for secret in secrets), "no secrets?"
    return secrets


def client_environment(stack: TopologyStack, settings: tenantq.Settings) -> dict[str, str]:
    """The ``TENANTQ_*`` variables a `tenantq` process needs to act as ``settings`` on the
    secure stack (the Kafka security settings included, password and all)."""
    from support import settings_environment

    return {**settings_environment(settings), "TENANTQ_DEV_HOME": str(stack.home)}
