"""What the poll loop does while the database is away: nothing read could be claimed, so every
partition pauses (the consumer keeps polling: the group keeps the member) and resumes when the
database is back; past ``database_outage_limit_seconds`` the worker gives up and stops."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.partitions import Partitions

log = logging.getLogger("tenantq.worker")


class Outage:
    """Follows ``DatabaseHealth`` for the partitions (poll thread; ``too_long`` any thread)."""

    def __init__(
        self,
        health: DatabaseHealth,
        limit_seconds: float | None,
        partitions: Partitions,
        consumer: Consumer,
    ) -> None:
        self._health = health
        self._limit = limit_seconds
        self._partitions = partitions
        self._consumer = consumer
        #: The database was up when the poll loop last looked (the partitions flow).
        self.seen_up = True

    def follow(self) -> bool:
        """Pause or resume every partition as the database went or came back; False once it
        has been away too long."""
        up = self._health.up
        if up != self.seen_up:
            self.seen_up = up
            if up:
                self._partitions.unsuspend(self._consumer)
            else:
                self._partitions.suspend(self._consumer)
        return up or not self.too_long()

    def too_long(self) -> bool:
        """The database has been away past the limit: time to stop."""
        limit = self._limit
        if limit is None or self._health.down_for() < limit:
            return False
        log.error(
            "database unreachable for %.0fs (limit %.0fs); stopping", self._health.down_for(), limit
        )
        return True
