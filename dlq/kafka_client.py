"""Kafka clients of the DLQ tools: quiet, and able to say in one line why Kafka refused them.

Left alone, librdkafka writes every connection failure to stderr from its own threads: a
broker that refuses the tool's SASL login prints a line every 50 ms until the metadata
request times out, then the tool fails with "Broker transport failure", which does not say
why. Here each client sends its log lines and error events to a ``ClientReport`` instead
(served by ``poll``), which keeps them at debug level in the ``tenantq.kafka`` logger and
names the most telling one when the tool gives up (``KafkaError._AUTHENTICATION`` first).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from confluent_kafka import KafkaError, Producer

log = logging.getLogger("tenantq.kafka")

#: Log lines kept for the summary; the rest only reach the debug log.
LINES_KEPT = 20
#: Error codes that mean "this client will never get in" (give up at once, say so).
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


class ClientReport:
    """What one Kafka client reported: its error events and last log lines."""

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
        for error in self.errors:
            if error.code() in REFUSED or error.fatal():
                return error
        return None

    def describe(self, failure: str) -> str:
        """What failed, in one line naming the cluster, with the client's most telling error
        when it has one."""
        cause = self.refused or (self.errors[-1] if self.errors else None)
        text = failure
        if cause is not None and cause.str() not in text:
            text = f"{text}; the client reported: {cause.str()}"
        return f"Kafka at {self.bootstrap_servers}: {' '.join(text.split())}"


def quiet_producer(report: ClientReport) -> Any:
    """A ``Publisher`` producer factory whose client reports to ``report``."""

    def factory(config: dict[str, Any]) -> Producer:
        return Producer({**config, **report.config()})

    return factory


def error_text(error: BaseException) -> str:
    """A ``KafkaException``'s own text (``Failed to get metadata: ...``), else ``str``."""
    argument = error.args[0] if error.args else None
    return str(argument.str()) if isinstance(argument, KafkaError) else str(error)
