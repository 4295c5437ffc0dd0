"""Kafka clients that say in one line, within a second or two, why a cluster refuses them.

librdkafka reports a refused SASL login or TLS handshake only as an error event (served by the
client's ``poll``) and a log line, then tries again for ever: a metadata request waits out its
whole timeout and fails with "Broker transport failure", which does not say why, while the
library writes a line to stderr every few hundred milliseconds. A ``ClientReport`` takes a
client's log lines (kept at debug level in the ``tenantq.kafka`` logger) and error events;
``read_metadata`` asks for metadata in short slices and gives up with ``KafkaAccessRefused`` as soon
as the report holds a refusal; ``check_kafka_access`` is that check for a process that is
starting (a worker, a relay): refused credentials fail it at once, an unreachable cluster is
left to the client's own retries (weather, not a configuration error).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from tenantq.errors import KafkaAccessRefused
from tenantq.settings import Settings

log = logging.getLogger("tenantq.kafka")

#: Log lines and error events kept for the one-line account; the rest only reach the debug log.
LINES_KEPT = 20
#: Error codes that mean "this client will never get in as configured".
REFUSED = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)
#: How long one metadata request waits before the client's error events are looked at: a
#: refused SASL login is reported 0.2-0.5 s after the connection opens.
METADATA_SLICE_SECONDS = 0.5
#: How long a starting process waits for the cluster to answer or refuse it.
ACCESS_CHECK_SECONDS = 10.0
#: Where a refused client's settings are, for the hint at the end of its line.
SECURITY_HINT = "check security.protocol, sasl.* and ssl.* in TENANTQ_KAFKA_CONFIG"


class ClientReport:
    """What one Kafka client reported: its error events and last log lines. ``config()`` is
    the client settings that send them here."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.errors: deque[KafkaError] = deque(maxlen=LINES_KEPT)
        self.lines: deque[str] = deque(maxlen=LINES_KEPT)

    def config(self) -> dict[str, Any]:
        """The client settings that send librdkafka's output here (``logger``, ``error_cb``)."""
        return {"logger": self, "error_cb": self.on_error}

    def log(self, level: int, message: str, *arguments: Any) -> None:
        """librdkafka's log line (the ``logger`` protocol of confluent-kafka)."""
        try:
            line = message % arguments
        except (TypeError, ValueError):
            line = " ".join([message, *map(str, arguments)])
        self.lines.append(line)
        log.debug("%s", line, extra={"kafka_level": level})

    def on_error(self, error: KafkaError) -> None:
        """librdkafka's error event (``error_cb``)."""
        self.errors.append(error)
        log.debug("kafka error: %s", error.str())

    @property
    def refused(self) -> KafkaError | None:
        """The first error that means the cluster refuses this client, if any."""
        for error in list(self.errors):
            if is_refusal(error):
                return error
        return None

    def refusal(self) -> KafkaAccessRefused | None:
        """The error to raise for the refusal the client reported, if it reported one."""
        error = self.refused
        if error is None:
            return None
        return KafkaAccessRefused(refusal_line(self.bootstrap_servers, error))

    def describe(self, failure: str) -> str:
        """What failed, in one line naming the cluster, with the client's most telling error
        when it has one."""
        errors = list(self.errors)
        cause = self.refused or (errors[-1] if errors else None)
        text = failure
        if cause is not None and cause.str() not in text:
            text = f"{text}; the client reported: {cause.str()}"
        return f"Kafka at {self.bootstrap_servers}: {' '.join(text.split())}"


def is_refusal(error: KafkaError) -> bool:
    """The cluster refuses the client's credentials, TLS or rights (or the client is dead)."""
    return error.code() in REFUSED or error.fatal()


def refusal_line(bootstrap_servers: str, error: KafkaError) -> str:
    """One line for a refused client: the cluster, what it said, where the settings are."""
    said = " ".join(error.str().split())
    return f"Kafka at {bootstrap_servers} refused tenantq's client: {said} ({SECURITY_HINT})"


def read_metadata(
    client: Any,
    report: ClientReport,
    *,
    topic: str | None = None,
    timeout: float,
    poll: Callable[[], object] | None = None,
    stopping: Callable[[], bool] | None = None,
) -> Any:
    """``client.list_topics(topic)`` that gives up with ``KafkaAccessRefused`` as soon as ``report``
    holds a refusal, else raises the client's last ``KafkaException`` once ``timeout`` (or
    ``stopping``) says so. ``poll`` serves the client's error events between the slices; a
    client whose events another thread serves (a producer's delivery thread) needs none."""
    deadline = time.monotonic() + timeout
    while True:
        asked = time.monotonic()
        wait = max(0.05, min(METADATA_SLICE_SECONDS, deadline - asked))
        try:
            return client.list_topics(topic, timeout=wait)
        except KafkaException:
            if poll is not None:
                poll()
            refused = report.refusal()
            if refused is not None:
                raise refused from None
            if asked + wait >= deadline or (stopping is not None and stopping()):
                raise
            # A client that fails at once (no broker to ask yet) asks again a slice later,
            # not in a spin.
            time.sleep(max(0.0, asked + wait - time.monotonic()))


def reporting_admin(settings: Settings, **config: Any) -> tuple[AdminClient, ClientReport]:
    """An admin client on the settings' cluster whose output goes to a new report."""
    report = ClientReport(settings.require_bootstrap_servers())
    admin = AdminClient(settings.kafka_client_config(**{**config, **report.config()}))
    return admin, report


def check_kafka_access(
    settings: Settings,
    *,
    timeout: float = ACCESS_CHECK_SECONDS,
    stopping: Callable[[], bool] | None = None,
) -> bool:
    """Ask the cluster for its metadata once, as a starting process does: raises
    ``KafkaAccessRefused`` when it refuses the client's credentials or TLS; returns True when it
    answered, False when it did not within ``timeout`` (down or slow: the process starts and
    its clients keep trying)."""
    admin, report = reporting_admin(settings, **{"client.id": "tenantq-access-check"})
    try:
        read_metadata(admin, report, timeout=timeout, poll=lambda: admin.poll(0), stopping=stopping)
    except KafkaAccessRefused:
        raise
    except KafkaException:
        return False
    return True
