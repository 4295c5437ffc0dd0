"""The console's own metrics and log events: wrong tokens and refused token checks.

Families come from ``tenantq.observability.specs`` (``source="console"``), on a registry of
the console's own, served at ``GET /metrics`` of the console (reading needs no token, like
every page). Client addresses go into log lines, never into labels.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tenantq.log import log_event
from tenantq.observability import specs
from tenantq.web.login_limiter import Refusal

logger = logging.getLogger("tenantq.web")

#: The ``via`` label values: the sign-in form, or an Authorization header.
TOKEN_WAYS = frozenset({"login", "bearer"})


class ConsoleMetrics:
    """Counts and logs what the failed-login limiter reports (``LoginEvents``)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._failures = _counter(specs.WEB_LOGIN_FAILURES, self.registry)
        self._refused = _counter(specs.WEB_LOGINS_REFUSED, self.registry)

    def token_failed(self, client: str, via: str, failures: int) -> None:
        """A wrong token: one log line and one count (``via`` is a closed list)."""
        if via not in TOKEN_WAYS:
            raise ValueError(f"unknown way a token came: {via!r}")
        self._failures.labels(via).inc()
        log_event(
            logger,
            "web.login.failed",
            logging.WARNING,
            client=client,
            via=via,
            failures_last_minute=failures,
        )

    def token_refused(self, client: str, refusal: Refusal, *, first: bool) -> None:
        """A token check refused unread: counted each time, logged once a minute per client
        (and once for the overall limit)."""
        self._refused.labels(refusal.limit).inc()
        if first:
            log_event(
                logger,
                "web.login.refused",
                logging.WARNING,
                client=client,
                limit=refusal.limit,
                retry_after_seconds=refusal.retry_after,
            )

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


def _counter(name: str, registry: CollectorRegistry) -> Counter:
    spec = specs.SPECS_BY_NAME[name]
    return Counter(spec.name, spec.help, spec.labels, registry=registry)
