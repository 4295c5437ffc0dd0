"""Guarantee: a worker told to stop stops, even when its Kafka broker is gone.

Found on a dev machine: a ``tenantq worker`` sent SIGTERM after the dev stack's broker had
been stopped drained its jobs, then sat in its final offset commit for good (a synchronous
commit waits for the group coordinator without end) and never exited, holding the metrics
port. The commit now has a bound; past it the worker goes on without it, which loses nothing:
the partitions' next owner reads from the last commit and the ledger marks what finished done.

Runs on a private stack (``private_stack`` marker): it kills the broker."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from private_stack import PrivateStack
from support import LoggedWorkerProcess, settings_environment, wait_for, while_alive

import tenantq
from tenantq.settings import QueueSettings
from tenantq.topic_admin import ensure_topics

pytestmark = pytest.mark.private_stack

JOBS = 40
#: The worker's bounds after the drain (``final_write_seconds``, ``leave_group_seconds``),
#: short here: the test is that the worker honours them, not how long they are.
FINAL_WRITE_SECONDS = 2.0
LEAVE_GROUP_SECONDS = 4.0
#: Those bounds and margin for a busy machine. Without the commit's bound the worker took 45 s
#: in that commit alone here, and forever on a dev machine.
EXIT_WITHIN_SECONDS = 30.0


def test_a_worker_told_to_stop_exits_with_its_broker_gone(
    private_stack: PrivateStack, tmp_path: Path
) -> None:
    settings = private_stack.settings(
        "nokafka",
        queues={"default": QueueSettings(partitions=4, retry_delays_seconds=(1.0, 3.0, 10.0))},
        worker={
            "final_write_seconds": FINAL_WRITE_SECONDS,
            "leave_group_seconds": LEAVE_GROUP_SECONDS,
        },
    )
    database_url = settings.require_database_url()
    ensure_topics(settings)
    worker = LoggedWorkerProcess(
        settings_environment(settings),
        "apps:APP",
        "--concurrency",
        "8",
        log_path=tmp_path / "worker.log",
    )
    try:
        with tenantq.Producer(settings) as producer:
            for future in [
                producer.enqueue("sleepy", tenant=f"t{n % 5}", payload={"seconds": 0})
                for n in range(JOBS)
            ]:
                future.result(30)
        with psycopg.connect(database_url, autocommit=True) as db:

            def succeeded() -> int:
                row = db.execute(
                    "SELECT count(*) FROM tenantq_jobs WHERE state = 'succeeded'"
                ).fetchone()
                return int(row[0]) if row else 0

            wait_for(while_alive(lambda: succeeded() == JOBS, worker), timeout=90, what="jobs")
        private_stack.kill_kafka()
        time.sleep(1.0)
        told = time.monotonic()
        status = worker.terminate(EXIT_WITHIN_SECONDS)
        took = time.monotonic() - told
    finally:
        if worker.alive():
            worker.kill()
    # The worker's own lines, without librdkafka's connection errors (one every 50 ms).
    lines = [line for line in worker.output().splitlines() if not line.startswith("%")]
    output = "\n".join(lines[-60:])
    assert status is not None, f"still running {EXIT_WITHIN_SECONDS:.0f}s after SIGTERM\n{output}"
    assert status == 0, output
    print(f"stopped {took:.1f}s after SIGTERM with the broker gone\n{output}")
