"""Guarantee: a run over the secure stack shows no password anywhere an operator looks. Jobs
run (a success, a retry, a dead letter, an outbox job) through a producer whose Kafka client
logs everything it does (librdkafka's ``debug=all``), a worker in this process and a
`tenantq worker` at DEBUG, the relay, the console and the CLI, and wrong passwords are tried
on both servers; then every log record of this process, every line a process printed, every
console page and API answer (signed in, and with the database refusing the console), every
`/metrics` sample and the ``repr`` and ``str`` of the settings, producer, worker, app, outbox
and relay are searched for the stack's passwords, the console token and the wrong passwords,
and none is found."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import apps
import psycopg
import pytest
from fastapi.testclient import TestClient
from private_stack import EXECUTIONS_TABLE
from pydantic import SecretStr
from secure_stack import client_environment, passwords, secure_stack
from sqlalchemy.engine import make_url
from support import WorkerProcess, all_in, running_worker, tenantq_command, wait_for
from topology_stack import TopologyStack
from web_console import console_settings, sign_in

import tenantq
from tenantq.consumer.worker import Worker
from tenantq.errors import TenantqError
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import psycopg_url
from tenantq.topic_admin import ensure_topics
from tenantq.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.secure]

TOKEN = "console-token-7f3a9c1e5b2d4068"
WRONG_KAFKA = "wrong-kafka-password-93b1"
WRONG_DATABASE = "wrong-database-password-5e27"
BASE = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def secure() -> Iterator[TopologyStack]:
    with secure_stack() as stack:
        yield stack


def command(arguments: list[str], environment: dict[str, str]) -> str:
    """What `tenantq ARGUMENTS` printed (both streams), with only these ``TENANTQ_*``."""
    completed = tenantq_command(arguments, environment, timeout=180)
    return completed.stdout + completed.stderr


def record_text(record: logging.LogRecord) -> str:
    """Everything a log handler could write of ``record``: the message, its fields and the
    traceback."""
    extras = {k: v for k, v in vars(record).items() if k not in ("msg", "args", "exc_info")}
    return " ".join([record.getMessage(), repr(extras), record.exc_text or ""])


def test_no_password_in_logs_pages_outputs_or_reprs(
    secure: TopologyStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = [*passwords(secure), TOKEN, WRONG_KAFKA, WRONG_DATABASE]
    seen: dict[str, str] = {}

    with secure.settings("leak") as settings:
        url = psycopg_url(settings.require_database_url())
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(EXECUTIONS_TABLE)
        ensure_topics(settings)
        apps.RECORD_URL = settings.require_database_url()
        app = apps.APP

        # A producer whose client logs all it does, through the tenantq.kafka logger.
        with tenantq.Producer(settings, app, debug="all") as producer:
            refs = [producer.enqueue("marker", tenant=f"t{i}", payload={}) for i in range(5)]
            refs.append(producer.enqueue("flaky", tenant="t1", payload={}))
            dead = producer.enqueue("refused", tenant="t2", payload={}).result(30).job_id
            ran = [ref.result(30).job_id for ref in refs]
            seen["repr(producer)"] = repr(producer)
        assert any(r.name == "tenantq.kafka" for r in caplog.records), "no librdkafka lines?"
        with tenantq.Outbox(app, settings=settings) as outbox, psycopg.connect(url) as conn:
            ran.append(outbox.enqueue(conn, "marker", tenant="t3", payload={}).job_id)
            seen["repr(outbox)"] = repr(outbox)
        relay = RelayService(settings, ["default"])
        try:
            assert relay.drain() == 1
            seen["repr(relay)"] = repr(relay)
        finally:
            relay.close()
        with psycopg.connect(url, autocommit=True) as db:
            with running_worker(app, settings, concurrency=4) as worker:
                wait_for(lambda: all_in(db, ran, {"succeeded"}), timeout=90, what="jobs ran")
                wait_for(lambda: all_in(db, [dead], {"dead"}), timeout=30, what="dead letter")
                seen["repr(worker)"] = repr(worker)
                seen["str(worker)"] = str(worker)

            environment = client_environment(secure, settings)
            process = WorkerProcess(
                settings, "apps:APP", env={**environment, "TENANTQ_LOG_LEVEL": "DEBUG"}
            )
            try:
                with tenantq.Producer(settings, app) as producer:
                    more = producer.enqueue("marker", tenant="t9", payload={}).result(30).job_id
                wait_for(lambda: all_in(db, [more], {"succeeded"}), timeout=90, what="worker")
            finally:
                process.terminate()
            seen["tenantq worker (DEBUG)"] = process.output()
            assert '"level":"debug"' in seen["tenantq worker (DEBUG)"]

        for name, value in [
            ("settings", settings),
            ("settings.model_dump()", settings.model_dump()),
            ("app", app),
        ]:
            seen[f"repr({name})"] = repr(value)
            seen[f"str({name})"] = str(value)
        seen["settings.model_dump_json()"] = settings.model_dump_json()

        # Wrong passwords: what the errors say, from the library and the CLI.
        wrong_kafka = settings.model_copy(
            update={"kafka_config": {**settings.kafka_config, "sasl.password": WRONG_KAFKA}}
        )
        database = make_url(settings.require_database_url())
        wrong_url = database.set(password=WRONG_DATABASE).render_as_string(False)
        wrong_database = settings.model_copy(update={"database_url": SecretStr(wrong_url)})
        for name, wrong in [("kafka", wrong_kafka), ("database", wrong_database)]:
            with pytest.raises(TenantqError) as raised:
                Worker(app, settings=wrong, install_signal_handlers=False).run()
            seen[f"Worker.run() with a wrong {name} password"] = repr(raised.value)
            seen[f"repr(settings with a wrong {name} password)"] = repr(wrong)
        wrong_environments = {
            "kafka": client_environment(secure, wrong_kafka),
            "database": client_environment(secure, wrong_database),
        }

        for arguments in (
            ["stats"],
            ["stats", "--json"],
            ["jobs", "show", str(dead)],
            ["dlq", "list"],
            ["topics", "ensure"],
            ["enqueue", "marker", "--tenant", "cli", "--payload", "{}"],
            ["outbox", "relay", "--once"],
            ["db", "current"],
            ["placement", "show"],
            ["periodic", "list"],
            ["dev", "status", "--json"],
        ):
            seen[f"tenantq {' '.join(arguments)}"] = command(arguments, environment)
            for name, wrong_environment in wrong_environments.items():
                seen[f"tenantq {' '.join(arguments)} (wrong {name} password)"] = command(
                    arguments, wrong_environment
                )
        assert "queue default" in seen["tenantq stats"]

        console = create_app(console_settings(settings, TOKEN))
        refusing = create_app(console_settings(wrong_database, TOKEN))
        try:
            client = TestClient(console, base_url=BASE)
            sign_in(client, "oncall", TOKEN)
            letters = client.get("/api/dlq").json()["letters"]
            assert [letter["job_id"] for letter in letters] == [str(dead)]
            for path in (
                "/",
                "/fragments/overview",
                "/tenants",
                "/jobs",
                f"/jobs/{dead}",
                f"/jobs/{uuid.uuid4()}",
                "/dlq",
                "/login",
                "/metrics",
                "/api/queues",
                "/api/tenants",
                "/api/jobs",
                f"/api/jobs/{dead}",
                "/api/dlq",
                "/nowhere",
            ):
                answer = client.get(path)
                seen[f"console GET {path}"] = str(answer.headers) + answer.text
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            answer = client.post(
                "/api/dlq/replay", json={"job_ids": [str(dead)], "dry_run": True}, headers=bearer
            )
            assert answer.status_code == 200, answer.text
            seen["console POST /api/dlq/replay"] = answer.text
            down = TestClient(refusing, base_url=BASE)
            for path in ("/", "/api/queues", f"/api/jobs/{dead}", "/jobs"):
                answer = down.get(path)
                seen[f"console GET {path} (database refusing)"] = answer.text
            assert "password authentication failed" in seen["console GET / (database refusing)"]
        finally:
            console.state.console.close()
            refusing.state.console.close()

    seen["log records"] = "\n".join(record_text(record) for record in caplog.records)
    assert len(seen) > 60
    leaks = [
        (where, secret) for where, text in seen.items() for secret in secrets if secret in text
    ]
    assert not leaks, leaks
