"""The public facade: ``import tenantq`` loads the foundation only, and the names of the
layers above it (``tenantq.Worker``, ``tenantq.Producer``, ...) are imported on first use, by
attribute and by ``from tenantq import ...`` alike."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tenantq

#: The packages above the foundation: importing the facade must not load any of them, or a
#: module of theirs imported first would run into itself half-initialised.
ABOVE_THE_FOUNDATION = (
    "cli", "consumer", "demo", "devstack", "dlq", "migrations", "observability", "outbox",
    "partitioner", "periodic", "producer", "retention", "schemas", "services", "store", "web",
)  # fmt: skip


def test_importing_the_facade_loads_the_foundation_only() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, tenantq; print(*sorted(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert "tenantq.app" in loaded
    above = [
        m for m in loaded if m.startswith("tenantq.") and m.split(".")[1] in ABOVE_THE_FOUNDATION
    ]
    assert above == []


def test_every_public_name_resolves() -> None:
    for name in tenantq.__all__:
        assert getattr(tenantq, name) is not None, name
    from tenantq import JobContext, Outbox, Producer, Worker

    assert Worker.__module__ == "tenantq.consumer.worker"
    assert Producer.__module__ == "tenantq.producer.producer"
    assert Outbox.__module__ == "tenantq.outbox.outbox"
    assert JobContext.__module__ == "tenantq.consumer.context"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Wroker'"):
        _ = tenantq.Wroker  # type: ignore[attr-defined]
