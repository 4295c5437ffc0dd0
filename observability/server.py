"""The ``/metrics`` HTTP endpoint.

It binds to ``Settings.metrics_host``, 127.0.0.1 unless configured otherwise: job and tenant
names are business data, and a scrape endpoint on every interface of a host is an easy leak.
Port 0 means disabled (not "any free port"), so a worker without metrics opens nothing.

Several workers on one host is the normal case (two systemd units, two queue sets), so a port
that is taken is not fatal: the next free one of the following ``PORT_TRIES - 1`` is used, with
one warning naming it; when all are taken, the worker runs without an endpoint and says so.
"""

from __future__ import annotations

import errno
import logging
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_wsgi_server

from tenantq.settings import Settings

logger = logging.getLogger("tenantq.metrics")

DEFAULT_HOST = "127.0.0.1"
#: Ports tried from the configured one upwards before serving nowhere.
PORT_TRIES = 16
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; ``close()`` stops it and frees the port."""

    host: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        """The scrape URL, e.g. ``http://127.0.0.1:9464/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and wait for the server thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve_metrics(
    registry: CollectorRegistry, host: str = DEFAULT_HOST, port: int = 0
) -> MetricsServer | None:
    """Serve ``registry`` on ``http://host:port/metrics`` from a daemon thread.

    Returns None when ``port`` is 0 (metrics disabled). An empty host is refused rather than
    read as "every interface": binding wide must be spelled out (``0.0.0.0`` or ``::``).
    """
    if port == 0:
        return None
    if not 0 < port < 65_536:
        raise ValueError(f"metrics port {port} is out of range")
    if not host:
        raise ValueError("metrics host is empty; use 127.0.0.1, or 0.0.0.0 to bind every interface")
    if host in _WILDCARDS:
        logger.warning("metrics endpoint binds every interface (%s:%d)", host, port)
    server, thread = start_wsgi_server(port, addr=host, registry=registry)
    bound_port = int(server.server_address[1])
    return MetricsServer(host=host, port=bound_port, _server=server, _thread=thread)


def serve_metrics_from_settings(
    registry: CollectorRegistry, settings: Settings
) -> MetricsServer | None:
    """``serve_metrics`` on ``settings.metrics_host``/``settings.metrics_port``, or on the
    next free port when that one is taken (see the module docstring); None when disabled or
    when every port tried is taken."""
    first = settings.metrics_port
    if first == 0:
        return None
    for port in range(first, min(first + PORT_TRIES, 65_536)):
        try:
            server = serve_metrics(registry, settings.metrics_host, port)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            continue
        if server is not None and port != first:
            logger.warning(
                "metrics port %d is taken (another worker on this host?); serving %s",
                first,
                server.url,
            )
        return server
    logger.warning(
        "metrics ports %d-%d are all taken; this process serves no /metrics",
        first,
        first + PORT_TRIES - 1,
    )
    return None
