"""Guarantee: over a secure stack (Kafka over SASL_SSL with SCRAM-SHA-512 and a CA of its
own, PostgreSQL over TLS with a password) the producer, a `tenantq worker` with its outbox
relay, the console and the CLI all work; and a wrong Kafka or PostgreSQL password is, from
the producer, a worker's start, the relay and every CLI command, one line that names the
server and says what it refused, within seconds, never a hang, a traceback or the password.
"""

from __future__ import annotations

import gc
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator

import apps
import psycopg
import pytest
from fastapi.testclient import TestClient
from private_stack import EXECUTIONS_TABLE
from pydantic import SecretStr
from secure_stack import client_environment, secure_stack
from sqlalchemy.engine import make_url
from support import WorkerProcess, all_in, one_line, tenantq_command, wait_for
from topology_stack import TopologyStack
from web_console import console_settings

import tenantq
from tenantq.consumer.worker import Worker
from tenantq.errors import DatabaseAccessRefused, KafkaAccessRefused
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import psycopg_url
from tenantq.topic_admin import ensure_topics
from tenantq.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.secure]

WRONG = "not-the-password-0451"
TOKEN = "secure-console-token-for-tests"
#: How long a refusal may take to be said: the client's first login attempt, under load.
REFUSAL_SECONDS = 15.0
#: A `tenantq` process also pays its own start (seconds on a busy two-core machine).
COMMAND_SECONDS = 60.0


@pytest.fixture(scope="module")
def secure() -> Iterator[TopologyStack]:
    with secure_stack() as stack:
        yield stack


@pytest.fixture
def settings(secure: TopologyStack) -> Iterator[tenantq.Settings]:
    """Settings on the secure stack: a fresh database (with the executions table the test
    handlers write to) and topics of their own."""
    with secure.settings("sec") as made:
        with psycopg.connect(psycopg_url(made.require_database_url()), autocommit=True) as conn:
            conn.execute(EXECUTIONS_TABLE)
        ensure_topics(made)
        apps.RECORD_URL = made.require_database_url()
        yield made


def with_wrong_kafka_password(settings: tenantq.Settings) -> tenantq.Settings:
    config = {**settings.kafka_config, "sasl.password": WRONG}
    return settings.model_copy(update={"kafka_config": config})


def with_wrong_database_password(settings: tenantq.Settings) -> tenantq.Settings:
    url = make_url(settings.require_database_url()).set(password=WRONG)
    return settings.model_copy(update={"database_url": SecretStr(url.render_as_string(False))})


def worker_refused(settings: tenantq.Settings, refusal: type[Exception]) -> str:
    """What a worker on ``settings`` says when a server refuses it: its ``run()`` raises
    ``refusal`` within ``REFUSAL_SECONDS``."""
    worker = Worker(apps.APP, settings=settings, install_signal_handlers=False)
    started = time.monotonic()
    with pytest.raises(refusal) as raised:
        worker.run()
    assert time.monotonic() - started < REFUSAL_SECONDS
    return str(raised.value)


def secrets_of(stack: TopologyStack) -> list[str]:
    return [WRONG, *stack.state["secrets"].values()]


# -- everything works ------------------------------------------------------------------------


def assert_commands_refused(
    commands: Iterable[list[str]],
    environment: dict[str, str],
    prefix: str,
    assert_refusal: Callable[[str], None],
) -> None:
    """Each ``tenantq`` command exits 2 within ``COMMAND_SECONDS`` with one line on stderr
    that starts with ``prefix`` and passes ``assert_refusal``."""
    for arguments in commands:
        started = time.monotonic()
        completed = tenantq_command(arguments, environment)
        seconds = time.monotonic() - started
        assert completed.returncode == 2, (arguments, completed.stdout, completed.stderr)
        line = one_line(completed.stderr)
        assert line.startswith(prefix), line
        assert_refusal(line)
        assert seconds < COMMAND_SECONDS, (arguments, seconds)


def test_producer_worker_relay_console_and_cli_work_over_the_secure_stack(
    secure: TopologyStack, settings: tenantq.Settings
) -> None:
    url = psycopg_url(settings.require_database_url())
    with tenantq.Producer(settings, apps.APP) as producer:
        futures = [
            producer.enqueue("marker", tenant=f"tenant-{i % 3}", payload={}) for i in range(10)
        ]
        futures.append(producer.enqueue("flaky", tenant="tenant-0", payload={}))
        refused = producer.enqueue("refused", tenant="tenant-1", payload={}).result(30).job_id
        succeeding = [future.result(30).job_id for future in futures]
    with tenantq.Outbox(apps.APP, settings=settings) as outbox, psycopg.connect(url) as conn:
        succeeding.append(outbox.enqueue(conn, "marker", tenant="outbox", payload={}).job_id)
    environment = client_environment(secure, settings)
    worker = WorkerProcess(settings, "apps:APP", env={"TENANTQ_DEV_HOME": str(secure.home)})
    try:
        with psycopg.connect(url, autocommit=True) as db:
            wait_for(
                lambda: all_in(db, succeeding, {"succeeded"}) and all_in(db, [refused], {"dead"}),
                timeout=120,
                what="every job ran, the outbox one through the worker's relay",
            )
            row = db.execute(
                "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
                "WHERE application_name LIKE 'tenantq-worker%' LIMIT 1"
            ).fetchone()
            assert row == (True,), "the worker's database sessions are TLS"
    finally:
        assert worker.terminate() == 0, worker.output()[-3000:]

    for arguments, said in [
        (["stats"], "queue default"),
        (["jobs", "show", str(refused)], "dead"),
        (["dlq", "list"], str(refused)),
        (["topics", "ensure"], ""),
        (["enqueue", "marker", "--tenant", "cli", "--payload", "{}"], f"{settings.topic_prefix}"),
    ]:
        completed = tenantq_command(arguments, environment)
        assert completed.returncode == 0, (arguments, completed.stdout, completed.stderr)
        assert said in completed.stdout, (arguments, completed.stdout)

    app = create_app(console_settings(settings, TOKEN))
    try:
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        overview = client.get("/api/queues").json()
        assert overview["database"]["up"] and overview["broker"]["up"], overview
        (queue,) = overview["queues"]
        assert queue["jobs"]["dead_last_hour"] == 1
        # Read from Kafka over SASL_SSL: the job the CLI enqueued waits for a worker.
        assert queue["consumer_lag"] == 1 and queue["dlq_records"] == 1
        job = client.get(f"/api/jobs/{refused}").json()
        assert job["job"]["state"] == "dead" and "refused on purpose" in str(job)
        assert str(refused) in client.get("/dlq").text
    finally:
        app.state.console.close()


# -- a wrong password --------------------------------------------------------------------------


def test_a_wrong_kafka_password_is_one_line_from_every_client(
    secure: TopologyStack, settings: tenantq.Settings, caplog: pytest.LogCaptureFixture
) -> None:
    bad = with_wrong_kafka_password(settings)
    servers = settings.require_bootstrap_servers()
    forbidden = secrets_of(secure)

    def assert_refusal(line: str) -> None:
        assert f"Kafka at {servers} refused tenantq's client" in line, line
        assert "SASL authentication error" in line and "\n" not in line
        assert not any(secret in line for secret in forbidden), line

    with tenantq.Producer(bad, apps.APP) as producer:
        started = time.monotonic()
        with pytest.raises(KafkaAccessRefused) as raised:
            producer.enqueue("marker", tenant="acme", payload={})
        assert time.monotonic() - started < REFUSAL_SECONDS
    assert_refusal(str(raised.value))

    assert_refusal(worker_refused(bad, KafkaAccessRefused))
    # The worker's Kafka clients, made when it was, go with it (else they try for ever).
    gc.collect()

    url = psycopg_url(settings.require_database_url())
    with tenantq.Outbox(apps.APP, settings=settings) as outbox, psycopg.connect(url) as conn:
        waiting = outbox.enqueue(conn, "marker", tenant="acme", payload={}).job_id
    relay = RelayService(bad, ["default"])
    started = time.monotonic()
    try:
        with pytest.raises(KafkaAccessRefused) as raised:
            relay.drain()
    finally:
        relay.close()
    assert time.monotonic() - started < REFUSAL_SECONDS
    assert_refusal(str(raised.value))
    # Inside a worker the relay is a background service: one log line says why, and it waits.
    caplog.set_level(logging.WARNING, logger="tenantq.background")
    service = RelayService(bad, ["default"])
    service.start()
    try:
        wait_for(
            lambda: any("KafkaAccessRefused" in r.getMessage() for r in caplog.records),
            timeout=REFUSAL_SECONDS,
            what="the relay's line",
        )
    finally:
        service.stop(10)
    lines = [r.getMessage() for r in caplog.records if "KafkaAccessRefused" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("outbox-relay: Kafka unavailable"), lines
    assert_refusal(lines[0])
    with psycopg.connect(url, autocommit=True) as db:
        entries = db.execute(
            "SELECT count(*) FROM tenantq_outbox WHERE job_id = %s", (waiting,)
        ).fetchone()
    assert entries == (1,), "the entry waits for a relay that gets in"

    environment = client_environment(secure, bad)
    kafka_commands = (
        ["worker", "apps:APP"],
        ["outbox", "relay"],
        ["outbox", "relay", "--once"],
        ["enqueue", "marker", "--tenant", "acme"],
        ["topics", "ensure"],
    )
    assert_commands_refused(kafka_commands, environment, "tenantq: ", assert_refusal)
    # The DLQ tools name the cluster and the refusal in their own words.
    completed = tenantq_command(["dlq", "list"], environment)
    line = one_line(completed.stderr)
    assert completed.returncode == 2
    assert f"Kafka at {servers}" in line and "SASL authentication" in line
    assert not any(secret in line for secret in forbidden)


def test_a_wrong_database_password_is_one_line_from_every_client(
    secure: TopologyStack, settings: tenantq.Settings
) -> None:
    bad = with_wrong_database_password(settings)
    server = make_url(settings.require_database_url())
    forbidden = secrets_of(secure)

    def assert_refusal(line: str) -> None:
        assert f'"{server.host}", port {server.port}' in line, line
        assert 'password authentication failed for user "postgres"' in line, line
        assert "\n" not in line
        assert not any(secret in line for secret in forbidden), line

    assert_refusal(worker_refused(bad, DatabaseAccessRefused))

    environment = client_environment(secure, bad)
    database_commands = (
        ["worker", "apps:APP"],
        ["outbox", "relay"],
        ["enqueue", "marker", "--tenant", "acme"],
        ["stats"],
        ["jobs", "show", str(uuid.uuid4())],
        ["db", "upgrade"],
    )
    assert_commands_refused(database_commands, environment, "tenantq: PostgreSQL", assert_refusal)
