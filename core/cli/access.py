"""The check a command that starts Kafka clients (``tenantq worker``, ``tenantq outbox
relay``, ``tenantq enqueue``) makes before it starts anything: credentials or TLS that a
server refuses end the command with one line naming the server (a worker's member would fail
the same way, and its supervisor start it again for ever); a server that is down is waited
for, as these commands do through any outage."""

from __future__ import annotations

from tenantq.kafka_access import check_kafka_access
from tenantq.settings import Settings
from tenantq.store.engine import check_database_access


def check_access(settings: Settings) -> None:
    """Raise ``DatabaseAccessRefused`` or ``KafkaAccessRefused`` if either server refuses
    ``settings`` (the database only when the settings name one: a producer may run without)."""
    if settings.database_url is not None:
        check_database_access(settings)
    check_kafka_access(settings)
