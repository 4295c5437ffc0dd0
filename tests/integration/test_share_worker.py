"""Guarantees of the share-group spike (``tenantq.consumer.share``), on a Kafka broker and
PostgreSQL of the module's own (share groups need Kafka 4.2 or newer; the private stack runs
the dev stack's default, 4.4.0):

- through three share members on a queue of two partitions (more consumers than
  partitions), every job ends in exactly one terminal state under the same Postgres leases
  as the consumer-group worker: each succeeded job ran once, each refused job is dead with
  one dead letter in tenantq's DLQ, and every record was accepted once;
- a share member killed mid-job: once the record's lock runs out the broker hands the record
  to another member, and the lease decides what runs: the job runs again as attempt 2, once;
- a share member frozen mid-job past its lock and its lease: its record goes to another
  member, which takes the lease over and finishes the job; when the frozen member wakes, its
  handler finishes too, and the store refuses its result as stale: one terminal state,
  attempt 2's.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import APP
from private_stack import PrivateStack
from support import (
    WorkerProcess,
    all_in,
    attempt_outcomes,
    executions,
    running_in_thread,
    short_leases,
    take_over_from_frozen_owner,
    wait_for,
)

import tenantq
from tenantq.consumer.share.group import ShareGroupOptions
from tenantq.consumer.share.worker import ShareWorker
from tenantq.settings import QueueSettings
from tenantq.topic_admin import ensure_topics, queue_topics

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]

#: The record lock the scenarios' share group runs with (the dev stack lets a group go down
#: to 1 s; the broker's default is 30 s).
LOCK_SECONDS = 3.0
SHARE_MEMBER = ("tenantq.consumer.share",)


def share_settings(stack: PrivateStack, partitions: int, **worker: Any) -> tenantq.Settings:
    settings = stack.settings(
        "share",
        queues={"default": QueueSettings(partitions=partitions)},
        worker=short_leases(2.0, **worker),
    )
    ensure_topics(settings)
    return settings


@contextlib.contextmanager
def running_share_worker(
    app: tenantq.App, settings: tenantq.Settings, **options: Any
) -> Iterator[ShareWorker]:
    """A share member in a thread of this process (handlers in threads); stopped gracefully
    on exit."""
    import apps

    apps.RECORD_URL = settings.require_database_url()
    worker = ShareWorker(
        app,
        settings=settings,
        install_signal_handlers=False,
        group=ShareGroupOptions(lock_seconds=LOCK_SECONDS),
        **options,
    )
    with running_in_thread(worker, "test-share-worker", "share worker") as running:
        yield running


def share_member_process(settings: tenantq.Settings) -> WorkerProcess:
    """``python -m tenantq.consumer.share apps:APP`` in a process group of its own."""
    return WorkerProcess(
        settings,
        "apps:APP",
        "--lock-seconds",
        str(LOCK_SECONDS),
        "--concurrency",
        "4",
        runner=SHARE_MEMBER,
    )


def dead_letters(settings: tenantq.Settings, expected: int) -> int:
    """Records in the queue's DLQ topic (read until ``expected`` or 20 s of nothing more)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        settings.kafka_client_config(
            **{"group.id": f"dlq-count-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
        )
    )
    consumer.subscribe([queue_topics(settings, "default").dlq])
    seen = 0
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and seen <= expected:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
                deadline = max(deadline, time.monotonic() + 3)
            elif seen >= expected and message is None:
                break
    finally:
        consumer.close()
    return seen


def test_every_job_ends_in_one_terminal_state_through_more_members_than_partitions(
    private_stack: PrivateStack,
) -> None:
    settings = share_settings(private_stack, partitions=2)
    app = tenantq.App(settings)
    ran: Counter[uuid.UUID] = Counter()
    lock = threading.Lock()

    @app.job("fine", max_attempts=3)
    def fine(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        time.sleep(0.05)
        with lock:
            ran[ctx.job_id] += 1

    @app.job("refused", max_attempts=3)
    def refused(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        with lock:
            ran[ctx.job_id] += 1
        raise tenantq.PermanentError("the payload names an account that does not exist")

    with tenantq.Producer(settings, app) as producer:
        futures = producer.enqueue_many(
            [
                {
                    "job_type": "refused" if i % 10 == 0 else "fine",
                    "tenant": f"t{i % 12}",
                    "payload": {},
                }
                for i in range(90)
            ]
        )
        job_ids = [future.result(30).job_id for future in futures]
    refused_ids = job_ids[::10]
    url = settings.require_database_url()
    with psycopg.connect(url, autocommit=True) as db:
        with contextlib.ExitStack() as members:
            workers = [
                members.enter_context(running_share_worker(app, settings, concurrency=4))
                for _ in range(3)
            ]
            wait_for(
                lambda: all_in(db, job_ids, {"succeeded", "dead"}), timeout=120, what="all jobs"
            )
        rows = db.execute(
            "SELECT id, state::text, attempts, last_error_class FROM tenantq_jobs "
            "WHERE id = ANY(%s)",
            (job_ids,),
        ).fetchall()
        ran_by = db.execute(
            "SELECT count(DISTINCT worker_id) FROM tenantq_job_attempts WHERE job_id = ANY(%s)",
            (job_ids,),
        ).fetchone()
    states = {row[0]: (row[1], row[2], row[3]) for row in rows}
    for job_id in job_ids:
        if job_id in refused_ids:
            assert states[job_id][0] == "dead" and states[job_id][2], states[job_id]
        else:
            assert states[job_id] == ("succeeded", 1, None)
        assert ran[job_id] == 1, f"job {job_id} ran {ran[job_id]} times"
    assert dead_letters(settings, len(refused_ids)) == len(refused_ids)
    counts = [worker.records.counts for worker in workers]
    print(f"records per member: {[dict(c) for c in counts]}; members that ran jobs: {ran_by}")
    assert sum(c["accepted"] for c in counts) == len(job_ids)
    assert sum(c["released"] + c["expired"] + c["late"] for c in counts) == 0


def test_a_member_killed_mid_job_its_record_comes_back_after_the_lock_and_runs_once_more(
    private_stack: PrivateStack,
) -> None:
    settings = share_settings(private_stack, partitions=1, concurrency=4)
    with tenantq.Producer(settings) as producer:
        job_id = producer.enqueue("marker", tenant="acme", payload={"seconds": 3}).result(30).job_id
    url = settings.require_database_url()
    with psycopg.connect(url, autocommit=True) as db:
        victim = share_member_process(settings)
        try:
            wait_for(
                lambda: executions(db, job_id) == [(1, "start")],
                timeout=90,
                what="attempt 1 to start",
            )
            victim.signal(signal.SIGKILL)
            killed_at = time.monotonic()
            victim.kill()
        finally:
            victim.kill()
        with running_share_worker(APP, settings, concurrency=4) as successor:
            wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=90, what="recovery")
            recovered = time.monotonic() - killed_at
            counts = dict(successor.records.counts)
        job = db.execute(
            "SELECT state::text, attempts, lease_owner FROM tenantq_jobs WHERE id = %s", (job_id,)
        ).fetchone()
        ran = executions(db, job_id)
    print(f"killed member: recovered in {recovered:.1f}s; successor's records {counts}")
    assert job == ("succeeded", 2, None)
    assert ran == [(1, "start"), (2, "start"), (2, "done")]
    # The record the killed member held came back to the group with a second delivery.
    assert counts.get("redelivered", 0) >= 1 and counts["accepted"] >= 1


def test_a_frozen_members_result_is_refused_after_another_member_took_its_record_and_lease(
    private_stack: PrivateStack,
) -> None:
    settings = share_settings(private_stack, partitions=1, concurrency=4)
    with tenantq.Producer(settings) as producer:
        job_id = (
            producer.enqueue("uncooperative", tenant="acme", payload={"seconds": 4})
            .result(30)
            .job_id
        )
    url = settings.require_database_url()
    with psycopg.connect(url, autocommit=True) as db:
        frozen = share_member_process(settings)
        try:
            wait_for(lambda: all_in(db, [job_id], {"leased"}), timeout=90, what="attempt 1")
            member = running_share_worker(APP, settings, concurrency=4)
            refused = "the frozen member's result to be refused"
            owner, successor = take_over_from_frozen_owner(db, job_id, frozen, member, refused)
        finally:
            frozen.signal(signal.SIGCONT)
            frozen.kill()
        job = db.execute(
            "SELECT state::text, attempts, lease_owner FROM tenantq_jobs WHERE id = %s", (job_id,)
        ).fetchone()
        attempts = attempt_outcomes(db, job_id)
        ran = executions(db, job_id)
    assert job == ("succeeded", 2, None)
    assert (2, successor.worker_id, "succeeded") in attempts
    assert (1, owner, "stale") in attempts
    # At-least-once execution, one result: both handlers ran to the end; the store kept one.
    assert sorted(ran) == [(1, "done"), (2, "done")]
