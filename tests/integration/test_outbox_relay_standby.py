"""Guarantee: one outbox relay per queue is active at a time. A second relay of the same
queue stands by (the advisory lock is held) and publishes nothing; when the active one
stops, the standby takes over within its standby interval and the entries still flow."""

from __future__ import annotations

from typing import Any

import psycopg
from support import wait_for

import tenantq
from tenantq.outbox.relay import RelayService
from tenantq.settings import OutboxSettings
from tenantq.store.engine import psycopg_url
from tenantq.topics import main_topic


def unsent(db: psycopg.Connection[Any], topic: str) -> int:
    row = db.execute("SELECT count(*) FROM tenantq_outbox WHERE main_topic = %s", (topic,))
    found = row.fetchone()
    assert found is not None
    return int(found[0])


def test_one_active_relay_and_a_standby_that_takes_over(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(outbox=OutboxSettings(standby_seconds=0.5))
    topic = main_topic(settings.topic_prefix, "default")
    url = psycopg_url(settings.require_database_url())
    first = RelayService(settings, ["default"], name="relay-1")
    second = RelayService(settings, ["default"], name="relay-2")
    with tenantq.Outbox(settings=settings) as outbox:

        def enqueue(count: int) -> None:
            with psycopg.connect(url) as conn:
                for n in range(count):
                    outbox.enqueue(conn, "noop", tenant="acme", payload={"n": n})

        first.start()
        wait_for(lambda: bool(first.held), timeout=10, what="the first relay holds the queue")
        second.start()
        enqueue(5)
        wait_for(lambda: unsent(db, topic) == 0, timeout=20, what="published")
        assert (first.published, second.published) == (5, 0)
        assert not second.held

        first.stop(10)
        wait_for(lambda: bool(second.held), timeout=10, what="the standby took over")
        enqueue(3)
        wait_for(lambda: unsent(db, topic) == 0, timeout=20, what="published by the standby")
        second.stop(10)
    assert (first.published, second.published) == (5, 3)
