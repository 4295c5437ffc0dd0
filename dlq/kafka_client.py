"""Kafka clients of the DLQ tools: quiet, and able to say in one line why Kafka refused them.

Left alone, librdkafka writes every connection failure to stderr from its own threads: a
broker that refuses the tool's SASL login prints a line every 50 ms until the metadata
request times out, then the tool fails with "Broker transport failure", which does not say
why. Here each client sends its log lines and error events to a ``ClientReport``
(``tenantq.kafka_access``, shared with the producer, the worker and the relay) instead, which
keeps them at debug level in the ``tenantq.kafka`` logger and names the most telling one when
the tool gives up (``KafkaError._AUTHENTICATION`` first).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Producer

from tenantq.kafka_access import ClientReport

__all__ = ["ClientReport", "error_text", "quiet_producer"]


def quiet_producer(report: ClientReport) -> Any:
    """A ``Publisher`` producer factory whose client reports to ``report``."""

    def factory(config: dict[str, Any]) -> Producer:
        return Producer({**config, **report.config()})

    return factory


def error_text(error: BaseException) -> str:
    """A ``KafkaException``'s own text (``Failed to get metadata: ...``), else ``str``."""
    argument = error.args[0] if error.args else None
    return str(argument.str()) if isinstance(argument, KafkaError) else str(error)
