"""The /metrics endpoint binds to 127.0.0.1 unless told otherwise, port 0 opens nothing, and
what it serves is the registry it was given."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from tenantq.observability.server import serve_metrics, serve_metrics_from_settings
from tenantq.observability.worker_metrics import WorkerMetrics
from tenantq.settings import Settings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_port_zero_is_disabled() -> None:
    assert serve_metrics(CollectorRegistry(), "127.0.0.1", 0) is None
    settings = Settings(kafka_bootstrap_servers="b:9092", metrics_port=0)
    assert serve_metrics_from_settings(CollectorRegistry(), settings) is None


def test_serves_the_registry_on_localhost_by_default() -> None:
    registry = CollectorRegistry()
    WorkerMetrics(registry).lease_expired("default")
    server = serve_metrics(registry, port=_free_port())
    assert server is not None
    try:
        assert server.host == "127.0.0.1"
        assert server._server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(server.url, timeout=5) as response:
            body = response.read().decode()
        assert 'tenantq_lease_expirations_total{queue="default"} 1.0' in body
    finally:
        server.close()


def test_settings_host_and_port_are_used() -> None:
    port = _free_port()
    settings = Settings(kafka_bootstrap_servers="b:9092", metrics_port=port)
    server = serve_metrics_from_settings(CollectorRegistry(), settings)
    assert server is not None
    try:
        assert (server.host, server.port) == ("127.0.0.1", port)
    finally:
        server.close()
    # Closed means the port is free again.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def test_empty_host_and_bad_port_are_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        serve_metrics(CollectorRegistry(), "", 9464)
    with pytest.raises(ValueError, match="out of range"):
        serve_metrics(CollectorRegistry(), "127.0.0.1", 70_000)
