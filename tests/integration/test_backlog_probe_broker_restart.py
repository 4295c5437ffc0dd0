"""Guarantee: the Kafka backlog probe behind the web console outlives a broker restart.

The broker is killed with -9 and started again three times while four threads read a
queue's backlog through one ``BacklogProbe`` in a process of its own. That process must keep
answering (an outage is a reading with an ``error``, never an exception or an exit), still be
alive at the end, and read the true lag once the broker is back: the group's committed
offsets, set here, against the partitions' ends.

The probe read committed offsets with the admin client's ``list_consumer_group_offsets``
until this test: in librdkafka 2.16 a restart during that request aborted the process
(``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed``), in two of
four restarts when measured. Runs on a private stack (``private_stack`` marker)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from private_stack import PrivateStack
from support import end_offsets, settings_environment, wait_for

import tenantq
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.settings import QueueSettings
from tenantq.topic_admin import ensure_topics
from tenantq.topics import consumer_group

pytestmark = pytest.mark.private_stack

HERE = Path(__file__).resolve().parent
PARTITIONS = 4
JOBS = 40
RESTARTS = 3


def test_backlog_probe_outlives_broker_restarts(
    private_stack: PrivateStack, tmp_path: Path
) -> None:
    settings = private_stack.settings(
        "probe",
        queues={"default": QueueSettings(partitions=PARTITIONS, retry_delays_seconds=(1.0,))},
    )
    ensure_topics(settings)
    ends = _enqueue(settings)
    # The group has committed the ends of partitions 0 and 1, nothing of 2 and 3.
    lag = sum(ends[p] for p in range(2, PARTITIONS))
    _commit(settings, {p: ends[p] for p in (0, 1)})
    assert lag > 0

    stop_file = tmp_path / "stop"
    output = tmp_path / "probe.jsonl"
    with output.open("w") as sink:
        probe = subprocess.Popen(
            [sys.executable, str(HERE / "backlog_probe_loop.py"), "default", str(stop_file)],
            env=settings_environment(settings),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_true_lag(output, probe, lag, after=0)
        for _ in range(RESTARTS):
            private_stack.kill_kafka()
            # Down long enough for requests in flight to fail and new ones to wait.
            time.sleep(2.0)
            private_stack.restart()
            # Only a reading written after the restart counts as recovered.
            _wait_for_true_lag(output, probe, lag, after=len(_readings(output)))
        stop_file.touch()
        assert probe.wait(30) == 0, _tail(output)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait(10)
    readings = _readings(output)
    assert readings[-1] == {"stopped": True}
    errors = [r for r in readings if r.get("error")]
    assert errors, "no reading saw the broker down: the restarts were not observed"


def _enqueue(settings: tenantq.Settings) -> dict[int, int]:
    """``JOBS`` jobs of several tenants; returns each partition's end offset."""
    with Producer(settings) as producer:
        refs = producer.enqueue_batch(
            [EnqueueRequest("noop", f"tenant-{n % 8}", {"n": n}) for n in range(JOBS)]
        ).result(30)
    assert len(refs) == JOBS
    return end_offsets(settings, f"{settings.topic_prefix}.default")


def _commit(settings: tenantq.Settings, offsets: dict[int, int]) -> None:
    topic = f"{settings.topic_prefix}.default"
    committer = Consumer(
        settings.kafka_client_config(
            **{"group.id": consumer_group(settings.topic_prefix, "default")}
        )
    )
    try:
        committer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        committer.close()


def _readings(output: Path) -> list[dict[str, object]]:
    readings = []
    for line in output.read_text().splitlines():
        if line.startswith("{"):
            readings.append(json.loads(line))
    return readings


def _wait_for_true_lag(
    output: Path, probe: subprocess.Popen[bytes], lag: int, *, after: int
) -> None:
    """Wait for a reading past the first ``after`` with the true lag and no error. Fails at
    once if the probe process has ended."""

    def answered() -> bool:
        assert probe.poll() is None, (
            f"the probe process ended ({probe.returncode}): {_tail(output)}"
        )
        fresh = _readings(output)[after:]
        return any(r.get("lag") == lag and not r.get("error") for r in fresh)

    wait_for(answered, timeout=90, interval=0.2, what=f"a reading of lag {lag}")


def _tail(output: Path) -> str:
    return "\n".join(output.read_text().splitlines()[-15:])
