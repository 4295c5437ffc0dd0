"""Helpers of the integration scenarios: workers in threads or in processes, and waiting on the
database for jobs to reach their states."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import tenantq
from tenantq.consumer.worker import Worker

HERE = Path(__file__).resolve().parent


@contextlib.contextmanager
def running_worker(
    app: tenantq.App, settings: tenantq.Settings, **options: Any
) -> Iterator[Worker]:
    """A worker in a thread of this process; stopped gracefully on exit."""
    import apps

    apps.RECORD_URL = settings.require_database_url()
    worker = Worker(app, settings=settings, install_signal_handlers=False, **options)
    errors: list[BaseException] = []

    def main() -> None:
        try:
            worker.run()
        except BaseException as error:  # surfaced in the test
            errors.append(error)

    thread = threading.Thread(target=main, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), "worker did not stop"
        if errors:
            raise errors[0]


def wait_for(
    predicate: Callable[[], bool], timeout: float = 60.0, interval: float = 0.1, what: str = ""
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def short_leases(lease_seconds: float = 2.0, **worker: Any) -> dict[str, Any]:
    """Worker settings (for ``make_settings(worker=...)``) under which a frozen or killed
    worker's lease runs out, and its owner counts as gone, ``lease_seconds`` after its last
    heartbeat; ``worker`` sets further fields."""
    return {
        "lease_seconds": lease_seconds,
        "heartbeat_interval_seconds": 0.5,
        "stale_owner_seconds": lease_seconds,
        **worker,
    }


def states(db: psycopg.Connection[Any], job_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    rows = db.execute(
        "SELECT id, state::text FROM tenantq_jobs WHERE id = ANY(%s)", (job_ids,)
    ).fetchall()
    return {row[0]: row[1] for row in rows}


def all_in(db: psycopg.Connection[Any], job_ids: list[uuid.UUID], wanted: set[str]) -> bool:
    found = states(db, job_ids)
    return len(found) == len(job_ids) and all(state in wanted for state in found.values())


def committed_offsets(settings: tenantq.Settings, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.kafka_client_config(**{"group.id": group}))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = [TopicPartition(topic, p) for p in metadata.topics[topic].partitions]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def end_offsets(settings: tenantq.Settings, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.kafka_client_config(**{"group.id": f"probe-{uuid.uuid4()}"}))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        result = {}
        for partition in metadata.topics[topic].partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            result[partition] = high
        return result
    finally:
        consumer.close()


class WorkerProcess:
    """A worker in its own process (``tests/integration/apps.py:APP``), for kill -9, SIGSTOP
    and graceful-shutdown scenarios. Settings travel as ``TENANTQ_*`` variables."""

    def __init__(
        self, settings: tenantq.Settings, app: str, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        environment = dict(os.environ)
        environment.update(settings_environment(settings))
        environment.update(env or {})
        environment["PYTHONPATH"] = str(HERE) + os.pathsep + environment.get("PYTHONPATH", "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tenantq.cli", "worker", app, *extra],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def terminate(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGKILL)
        self.process.wait(30)

    def output(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stdout is not None
        return self.process.stdout.read()


def settings_environment(settings: tenantq.Settings) -> dict[str, str]:
    """The ``TENANTQ_*`` variables that rebuild ``settings`` in another process."""
    data = settings.model_dump(mode="json")
    environment = {
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
        "TENANTQ_DATABASE_URL": settings.require_database_url(),
        "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
        "TENANTQ_QUEUES": json.dumps(data["queues"]),
        "TENANTQ_WORKER": json.dumps(data["worker"]),
        "TENANTQ_METRICS_PORT": str(settings.metrics_port),
    }
    return environment


def caught_up(settings: tenantq.Settings, group: str, topic: str) -> bool:
    """True when ``group`` has committed the end offset of every non-empty partition."""
    ends = end_offsets(settings, topic)
    committed = committed_offsets(settings, group, topic)
    return all(committed.get(p) == end for p, end in ends.items() if end > 0)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    """The text of ``/metrics`` served on 127.0.0.1:``port``."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def sample_value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` whose labels include ``labels`` in a scrape, or None."""
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None
