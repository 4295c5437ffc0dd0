"""What the poll loop does while the database is away: nothing read could be claimed, so every
partition pauses (the consumer keeps polling: the group keeps the member) and resumes when the
database is back; past ``database_outage_limit_seconds`` the worker gives up and stops."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from confluent_kafka import Consumer

from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.partitions import Partitions

log = logging.getLogger("tenantq.worker")


@dataclass(eq=False)
class Outage:
    """Follows ``DatabaseHealth`` for the partitions (poll thread; ``too_long`` any thread)."""

    health: DatabaseHealth
    limit_seconds: float | None
    partitions: Partitions
    consumer: Consumer
    #: The database was up when the poll loop last looked (the partitions flow).
    seen_up: bool = field(default=True, init=False)

    def follow(self) -> bool:
        """Pause or resume every partition as the database went or came back; False once it
        has been away too long."""
        up = self.health.up
        if up != self.seen_up:
            self.seen_up = up
            if up:
                self.partitions.unsuspend(self.consumer)
            else:
                self.partitions.suspend(self.consumer)
        return up or not self.too_long()

    def too_long(self) -> bool:
        """The database has been away past the limit: time to stop."""
        limit = self.limit_seconds
        if limit is None or self.health.down_for() < limit:
            return False
        log.error(
            "database unreachable for %.0fs (limit %.0fs); stopping", self.health.down_for(), limit
        )
        return True
