"""Guarantee: a job enqueued through the outbox exists exactly when the caller's transaction
commits. A rolled-back enqueue leaves no row, no entry and no message, and never runs; a
committed one is `pending` at once and runs exactly once after the relay publishes it, with
a psycopg Connection, a SQLAlchemy Connection or Session, or a psycopg AsyncConnection."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
from sqlalchemy.orm import Session
from support import all_in, counting_app, running_worker, wait_for

import tenantq
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import create_sqlalchemy_engine, psycopg_url
from tenantq.topics import main_topic


def test_only_committed_outbox_jobs_run_once(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app, ran = counting_app(settings, "receipt")

    url = psycopg_url(settings.require_database_url())
    engine = create_sqlalchemy_engine(settings)
    committed: list[uuid.UUID] = []
    rolled_back: list[uuid.UUID] = []
    with tenantq.Outbox(app) as outbox:
        with psycopg.connect(url) as conn:
            ref = outbox.enqueue(conn, "receipt", tenant="acme", payload={"order": 1})
            conn.rollback()
            rolled_back.append(ref.job_id)
            assert ref.created
        with psycopg.connect(url) as conn:  # commits when the block ends
            committed.append(
                outbox.enqueue(conn, "receipt", tenant="acme", payload={"n": 2}).job_id
            )
        with engine.begin() as sa_connection:
            committed.append(
                outbox.enqueue(sa_connection, "receipt", tenant="beta", payload={"n": 3}).job_id
            )
        with engine.connect() as sa_connection:
            ref = outbox.enqueue(sa_connection, "receipt", tenant="beta", payload={"n": 4})
            sa_connection.rollback()
            rolled_back.append(ref.job_id)
        with Session(engine) as session, session.begin():
            committed.append(
                outbox.enqueue(session, "receipt", tenant="gamma", payload={"n": 5}).job_id
            )
        with Session(engine) as session:
            ref = outbox.enqueue(session, "receipt", tenant="gamma", payload={"n": 6})
            session.rollback()
            rolled_back.append(ref.job_id)

        async def in_async(commit: bool) -> uuid.UUID:
            async with await psycopg.AsyncConnection.connect(url) as conn:
                ref = await outbox.enqueue_async(conn, "receipt", tenant="delta", payload={})
                await (conn.commit() if commit else conn.rollback())
                return ref.job_id

        committed.append(asyncio.run(in_async(True)))
        rolled_back.append(asyncio.run(in_async(False)))
    engine.dispose()

    # Visible before anything reached Kafka: pending rows, one outbox entry each.
    assert all_in(db, committed, {"pending"})
    assert not db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s)", (rolled_back,)
    ).fetchone()[0]  # type: ignore[index]
    topic = main_topic(settings.topic_prefix, "default")
    entries = db.execute(
        "SELECT job_id FROM tenantq_outbox WHERE main_topic = %s", (topic,)
    ).fetchall()
    assert sorted(row[0] for row in entries) == sorted(committed)

    relay = RelayService(settings, ["default"])
    relay.start()
    try:
        with running_worker(app, settings):
            wait_for(lambda: all_in(db, committed, {"succeeded"}), timeout=60, what="jobs ran")
            time.sleep(1.0)  # room for a stray duplicate to show up
    finally:
        relay.stop(10)
    assert dict(ran) == dict.fromkeys(committed, 1)
    assert relay.published == len(committed)
    left = db.execute("SELECT count(*) FROM tenantq_outbox WHERE main_topic = %s", (topic,))
    assert left.fetchone() == (0,)
