"""Guarantee: an outbox job runs once even when its relay is killed after Kafka acknowledged
the record and before the entry was marked sent: the next relay publishes it again, and the
worker's claim (same job id, same payload hash as the row the enqueue wrote) runs nothing
twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import psycopg
from confluent_kafka import KafkaException
from support import (
    all_in,
    caught_up,
    counting_app,
    end_offsets,
    running_worker,
    settings_environment,
    wait_for,
)

import tenantq
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import psycopg_url
from tenantq.topics import consumer_group, main_topic


def records_in(settings: tenantq.Settings, topic: str) -> int:
    """Records in ``topic``; -1 while a fresh topic's partitions still elect their leader."""
    try:
        return sum(end_offsets(settings, topic).values())
    except KafkaException:
        return -1


def test_relay_killed_between_publish_and_mark(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app, ran = counting_app(settings, "receipt")

    url = psycopg_url(settings.require_database_url())
    topic = main_topic(settings.topic_prefix, "default")
    with tenantq.Outbox(app) as outbox, psycopg.connect(url) as conn:
        job_id = outbox.enqueue(conn, "receipt", tenant="acme", payload={"order": 7}).job_id

    # A key-share lock lets the relay stamp the entry (a non-key update) but not delete it:
    # the relay publishes, then blocks exactly between publish and mark.
    with psycopg.connect(url) as blocker:
        blocker.execute("SELECT 1 FROM tenantq_outbox WHERE job_id = %s FOR KEY SHARE", (job_id,))
        relay = subprocess.Popen(
            [sys.executable, "-m", "tenantq.cli", "outbox", "relay"],
            env={**os.environ, **settings_environment(settings)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for(
                lambda: records_in(settings, topic) == 1,
                timeout=60,
                interval=0.3,
                what="the relay published the record",
            )
        finally:
            os.kill(relay.pid, signal.SIGKILL)
            relay.wait(30)
        blocker.rollback()
    assert db.execute(
        "SELECT count(*) FROM tenantq_outbox WHERE job_id = %s", (job_id,)
    ).fetchone() == (1,), "the killed relay marked nothing"

    second = RelayService(settings, ["default"])
    second.start()
    try:
        with running_worker(app, settings):
            wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=60, what="job ran")
            wait_for(
                lambda: (
                    db.execute(
                        "SELECT count(*) FROM tenantq_outbox WHERE job_id = %s", (job_id,)
                    ).fetchone()
                    == (0,)
                ),
                timeout=30,
                what="the second relay marked the entry",
            )
            # Both copies are in Kafka, and the worker has read (and committed) past both.
            assert records_in(settings, topic) == 2
            group = consumer_group(settings.topic_prefix, "default")
            wait_for(lambda: caught_up(settings, group, topic), timeout=30, what="caught up")
    finally:
        second.stop(10)
    assert ran == {job_id: 1}
    row = db.execute("SELECT attempts FROM tenantq_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (1,)
