"""The delivery thread keeps out of a publication's way, and serves at once again when told
that the publication under way hands its client nothing."""

from __future__ import annotations

import threading
import time

from tenantq.producer.delivery_reports import DeliveryReports


class CountingClient:
    """A client with one message always in flight; ``polled`` is set at each poll."""

    def __init__(self) -> None:
        self.polled = threading.Event()

    def poll(self, timeout: float) -> int:
        self.polled.set()
        time.sleep(timeout)
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def __len__(self) -> int:
        return 1


def test_a_publication_of_the_other_client_does_not_hold_back_this_ones_reports() -> None:
    client = CountingClient()
    reports = DeliveryReports(client)
    try:
        # A publication that keeps the delivery thread away for a long while.
        reports.publishing(time.monotonic() + 30)
        time.sleep(0.1)
        client.polled.clear()
        assert not client.polled.wait(0.3)
        reports.not_publishing()
        assert client.polled.wait(5)
    finally:
        reports.stop()
