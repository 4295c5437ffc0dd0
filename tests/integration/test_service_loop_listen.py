"""Guarantee: a service loop waiting for notifications on a real ``LISTEN`` connection (the
placement and quota watchers) sees one that arrived while the connection ran a query at once,
not after its wait, and sees one that arrives during the wait."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from tenantq.background import ServiceLoop
from tenantq.store.engine import psycopg_url

CHANNEL = "tenantq_test_service_loop_listen"


class Listening(ServiceLoop):
    """Never started: the test calls its wait from its own thread."""

    def __init__(self) -> None:
        super().__init__("listening")


def payloads(notifications: list[Any]) -> list[str]:
    return [notification.payload for notification in notifications]


def test_a_notification_read_during_a_query_is_seen_at_once(database_url: str) -> None:
    url = psycopg_url(database_url)
    loop = Listening()
    with (
        psycopg.connect(url, autocommit=True) as listener,
        psycopg.connect(url, autocommit=True) as other,
    ):
        listener.execute(f"LISTEN {CHANNEL}")
        other.execute(f"NOTIFY {CHANNEL}, 'during-a-query'")
        time.sleep(0.2)
        # The query reads the notification off the socket: nothing is left to wake a wait.
        listener.execute("SELECT 1")
        started = time.monotonic()
        assert payloads(loop.wait_for_notifies(listener, 30.0)) == ["during-a-query"]
        assert time.monotonic() - started < 5.0

        later = threading.Timer(0.3, lambda: other.execute(f"NOTIFY {CHANNEL}, 'later'"))
        later.start()
        started = time.monotonic()
        assert payloads(loop.wait_for_notifies(listener, 30.0)) == ["later"]
        assert time.monotonic() - started < 5.0
        later.join()
    loop.stop(timeout=1)
