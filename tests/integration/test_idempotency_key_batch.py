"""Guarantee: two new jobs with one ``idempotency_key`` in one claim batch do not kill the
worker: exactly one job with that key exists and runs once, the other is done as a duplicate
by key (its offset consumed, never run), and the jobs behind them keep flowing. A producer
cannot stop a queue with two messages.

The pair comes from a producer without database access (a service that only talks to Kafka):
a producer that can read ``tenantq_jobs`` collapses a key it already sees
(``producer/unique.py``), but one without, or two racing within that window, delivers both
messages, and the claim is where they must collapse."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
from support import (
    LoggedWorkerProcess,
    assert_alive,
    caught_up,
    descendants,
    settings_environment,
    wait_for,
    wait_for_states,
    while_alive,
)

import tenantq
from tenantq.topics import consumer_group


def _enqueue_pair_and_followers(
    settings: tenantq.Settings, key: str, tenant: str
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """Two jobs with ``key`` back to back in one produce batch (one tenant, so one partition,
    one fetch, one claim), then followers on the same partition."""
    kafka_only = settings.model_copy(update={"database_url": None})
    with tenantq.Producer(kafka_only) as producer:
        pair = producer.enqueue_batch(
            [
                {
                    "job_type": "sleepy",
                    "tenant": tenant,
                    "payload": {"n": n},
                    "idempotency_key": key,
                }
                for n in (1, 2)
            ]
        ).result(30)
        followers = producer.enqueue_batch(
            [{"job_type": "sleepy", "tenant": tenant, "payload": {"n": n}} for n in range(3, 13)]
        ).result(30)
    return [ref.job_id for ref in pair], [ref.job_id for ref in followers]


def _check_pair(db: psycopg.Connection[Any], key: str, pair: list[uuid.UUID]) -> uuid.UUID:
    holders = db.execute(
        "SELECT id, state::text FROM tenantq_jobs WHERE queue = 'default' AND idempotency_key = %s",
        (key,),
    ).fetchall()
    assert len(holders) == 1, f"jobs holding key {key!r}: {holders}"
    winner, state = holders[0]
    assert winner in pair and state == "succeeded", holders
    loser = next(job_id for job_id in pair if job_id != winner)
    runs = dict(
        db.execute(
            "SELECT job_id, count(*) FROM test_executions WHERE job_id = ANY(%s) GROUP BY job_id",
            (pair,),
        ).fetchall()
    )
    assert runs == {winner: 1}, f"executions of the pair: {runs}"
    # The duplicate is never a live job: no row, or a finished one (without the key).
    row = db.execute("SELECT state::text FROM tenantq_jobs WHERE id = %s", (loser,)).fetchone()
    assert row is None or row[0] in {"succeeded", "dead", "canceled"}, row
    return winner


def test_one_idempotency_key_twice_in_a_batch_does_not_kill_the_worker(
    make_settings: Any, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    settings = make_settings()
    since = db.execute("SELECT now()").fetchone()
    assert since is not None
    key = f"order-{uuid.uuid4().hex[:8]}"
    # Both jobs are in the partition before the worker starts: its first fetch holds both.
    pair, followers = _enqueue_pair_and_followers(settings, key, "acme")
    worker = LoggedWorkerProcess(
        settings_environment(settings), "apps:APP", log_path=tmp_path / "worker.log"
    )
    try:
        wait_for_states(
            db, followers, {"succeeded"}, worker, timeout=60, what="the jobs behind the pair"
        )
        first = _check_pair(db, key, pair)
        # Again with the worker running (the pair arrives in one fetch of a live consumer).
        second_key = f"order-{uuid.uuid4().hex[:8]}"
        second_pair, more = _enqueue_pair_and_followers(settings, second_key, "globex")
        wait_for_states(
            db, more, {"succeeded"}, worker, timeout=60, what="the jobs behind the second pair"
        )
        _check_pair(db, second_key, second_pair)
        topic = f"{settings.topic_prefix}.default"
        group = consumer_group(settings.topic_prefix, "default")
        # Every message, the duplicates included, is accounted for: the group's committed
        # offsets reach the end of the topic.
        wait_for(
            while_alive(lambda: caught_up(settings, group, topic), worker),
            timeout=30,
            what="offsets committed past the duplicates",
        )
        assert_alive(worker)
        living = {worker.pid, *descendants(worker.pid)}
        members = db.execute(
            "SELECT id, pid FROM tenantq_workers WHERE started_at >= %s", (since[0],)
        ).fetchall()
    finally:
        status = worker.terminate(60)
    output = worker.output()
    assert status == 0, output[-4000:]
    assert "Traceback" not in output and "UniqueViolation" not in output, output[-4000:]
    # No member died and was replaced along the way: every one that registered still ran.
    assert members and all(pid in living for _, pid in members), (members, living)
    print(f"idempotency key twice in one batch: kept {first}, the duplicate done by key")
