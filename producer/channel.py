"""A Kafka client of the producer and what the producer keeps beside it.

The producer has one channel for every tenant, and a second one for the tenants that flood it
(``tenantq.producer.flood_meter``), made the first time one does. A tenant's jobs go through
one channel at a time, so Kafka keeps their order in each partition as one client keeps it.
"""

from __future__ import annotations

import threading
from typing import Any

from tenantq.producer.delivery_reports import DeliveryReports


class Channel:
    """A Kafka client, its ``produce`` with positional arguments
    (``tenantq.producer.producer.positional_produce``), the delivery thread that serves its
    reports, and the lock held while jobs are handed to it.

    The lock is reentrant (a delivery callback may enqueue). A tenant moves from one channel
    to the other only while the producer holds the lock of the channel it leaves, so no
    publication is halfway through handing that tenant's jobs to it.
    """

    __slots__ = ("client", "lock", "produce", "reports")

    def __init__(self, client: Any, produce: Any, reports: DeliveryReports) -> None:
        self.client = client
        self.produce = produce
        self.reports = reports
        self.lock = threading.RLock()

    def in_flight(self) -> int:
        """Messages handed to the client and not yet reported (0 for a client that does not
        count them)."""
        try:
            return len(self.client)
        except TypeError:
            return 0
