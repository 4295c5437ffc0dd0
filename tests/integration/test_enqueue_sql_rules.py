"""Guarantee: ``tenantq_enqueue`` refuses exactly what the Python SDK refuses (tenant ids, job
type names, idempotency keys, run_after, sizes), with SQLSTATE 22023 and a message naming the
argument, and nothing written; a queue no relay registered is refused; whatever it accepts,
the relay can publish (its envelope bound is never below the encoder's length); one
idempotency key names one job, also between concurrent transactions; it runs with the
caller's privileges, and no object on the caller's search path can stand in for its own."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg import errors, sql

from tenantq.errors import InvalidJobError, InvalidTenantId
from tenantq.producer.validation import (
    check_idempotency_key,
    check_job_type_name,
    resolve_due_time,
)
from tenantq.schemas.envelope import DEFAULT_CODEC
from tenantq.store.engine import psycopg_url
from tenantq.tenant_ids import validate_tenant_id

PREFIX = "rules"
ENQUEUE = """
SELECT tenantq_enqueue(%(queue)s, %(job_type)s, %(tenant)s, %(payload)s::jsonb,
                       %(key)s, %(run_after)s, %(prefix)s)
"""
REGISTER = """
INSERT INTO tenantq_outbox_queues (deployment, queue, main_topic, max_payload_bytes,
                                   max_message_bytes, default_max_attempts)
VALUES (%(prefix)s, %(queue)s, %(prefix)s || '.' || %(queue)s, %(payload_limit)s,
        %(message_limit)s, 8)
ON CONFLICT (deployment, queue) DO UPDATE SET max_payload_bytes = excluded.max_payload_bytes,
    max_message_bytes = excluded.max_message_bytes
"""

#: Characters near the rules' edges: allowed punctuation, the separator of spread keys, a
#: space, a newline, a letter and a digit outside ASCII, a quote.
EDGE_CHARACTERS = "aZ09._:-#/ \n\té٣'\"Ａ"


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose transaction registers queue ``default`` of deployment ``rules`` and
    is rolled back at the end: nothing a test enqueues outlives it."""
    with psycopg.connect(psycopg_url(database_url)) as connection:
        register(connection, "default")
        yield connection
        connection.rollback()


def register(
    connection: psycopg.Connection[Any],
    queue: str,
    *,
    payload_limit: int = 512_000,
    message_limit: int = 1_000_000,
    prefix: str = PREFIX,
) -> None:
    connection.execute(
        REGISTER,
        {"prefix": prefix, "queue": queue, "payload_limit": payload_limit,
         "message_limit": message_limit},
    )  # fmt: skip


def enqueue(connection: psycopg.Connection[Any], **arguments: Any) -> uuid.UUID:
    values = {
        "queue": "default",
        "job_type": "send_email",
        "tenant": "acme",
        "payload": '{"n": 1}',
        "key": None,
        "run_after": None,
        "prefix": PREFIX,
    }
    values.update(arguments)
    row = connection.execute(ENQUEUE, values).fetchone()
    assert row is not None
    return uuid.UUID(str(row[0]))


def outcome(connection: psycopg.Connection[Any], **arguments: Any) -> psycopg.Error | None:
    """None if ``tenantq_enqueue`` accepts ``arguments`` (the job is rolled back), else its
    error, after checking that the refusal wrote nothing."""
    before = count_jobs(connection)
    try:
        with connection.transaction():
            enqueue(connection, **arguments)
            raise psycopg.Rollback()
    except psycopg.Error as error:
        assert count_jobs(connection) == before
        return error
    return None


def count_jobs(connection: psycopg.Connection[Any]) -> int:
    row = connection.execute("SELECT count(*) FROM tenantq_jobs WHERE deployment = %s", (PREFIX,))
    return int(row.fetchone()[0])  # type: ignore[index]


def refused_with(error: psycopg.Error | None, argument: str) -> str:
    assert isinstance(error, errors.InvalidParameterValue), error
    message = error.diag.message_primary or ""
    assert message.startswith("tenantq_enqueue: "), message
    assert argument in message, message
    return message


def refused_as_the_sdk_refuses(
    error: psycopg.Error | None, check: Any, value: Any, argument: str
) -> None:
    """``error``, the function's answer to ``value`` as ``argument``, is None when the SDK's
    ``check`` accepts the value, and a refusal that names ``argument`` when it does not."""
    try:
        check(value)
    except (InvalidJobError, InvalidTenantId):
        refused_with(error, argument)
    else:
        assert error is None


def example_each(argument: str) -> Any:
    """``@example`` of every name of ``EDGES`` for ``argument``."""

    def decorate(test: Any) -> Any:
        for value in EDGES:
            test = example(**{argument: value})(test)
        return test

    return decorate


HYPOTHESIS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
#: Names at the edges of every rule, tried first.
EDGES = ("", "a", "send_email\n", "a b", "é", "a#1", "x" * 128, "x" * 129, "x" * 256, "x" * 257)
#: Text Postgres can hold (no NUL, no lone surrogates), often near the rules' edges.
TEXT = st.one_of(
    st.text(st.sampled_from(EDGE_CHARACTERS), max_size=12),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    st.integers(120, 300).map(lambda size: "t" * size),
)


@HYPOTHESIS
@given(tenant=TEXT)
@example_each("tenant")
def test_tenant_ids_are_refused_exactly_as_the_sdk_refuses_them(
    conn: psycopg.Connection[Any], tenant: str
) -> None:
    error = outcome(conn, tenant=tenant)
    try:
        validate_tenant_id(tenant)
    except InvalidTenantId as python_error:
        message = refused_with(error, "tenant")
        # The same words as the SDK's, down to the position of the first bad character.
        expected = str(python_error)
        if " at position " in expected:
            assert message.endswith(" at position " + expected.split(" at position ")[1])
        else:
            assert message == f"tenantq_enqueue: {expected}"
    else:
        assert error is None


@pytest.mark.parametrize(
    ("argument", "check", "named"),
    [
        ("job_type", check_job_type_name, "job_type"),
        ("key", check_idempotency_key, "idempotency_key"),
    ],
)
@HYPOTHESIS
@given(value=st.one_of(TEXT, st.integers(250, 260).map(lambda size: "é" * size)))
@example_each("value")
def test_job_type_names_and_idempotency_keys_are_refused_exactly_as_the_sdk_refuses_them(
    conn: psycopg.Connection[Any], argument: str, check: Any, named: str, value: str
) -> None:
    error = outcome(conn, **{argument: value})
    refused_as_the_sdk_refuses(error, check, value, named)


def test_run_after_is_refused_as_the_sdk_refuses_it(conn: psycopg.Connection[Any]) -> None:
    # In a zone whose days are not all 24 hours: 366 days are 8,784 hours, as in Python.
    conn.execute("SET LOCAL TimeZone = 'Europe/Paris'")
    now = dt.datetime.now(dt.UTC)
    year = dt.timedelta(days=366)
    for run_after, accepted in [
        (now + year - dt.timedelta(minutes=1), True),
        (now + year + dt.timedelta(minutes=1), False),
        (now - dt.timedelta(days=40_000), True),  # long past: it runs now
    ]:
        try:
            resolve_due_time(run_after, None, now)
        except InvalidJobError:
            python = False
        else:
            python = True
        assert python is accepted
        error = outcome(conn, run_after=run_after)
        assert (error is None) is accepted, error
        if not accepted:
            refused_with(error, "run_after")
    for infinite in ("infinity", "-infinity"):
        error = outcome(conn, run_after=infinite)
        assert "run_after must be a finite time" in refused_with(error, "run_after")


def test_null_arguments_are_refused_by_name(conn: psycopg.Connection[Any]) -> None:
    for argument in ("queue", "job_type", "tenant", "payload", "prefix"):
        error = outcome(conn, **{argument: None})
        refused_with(error, {"prefix": "topic_prefix"}.get(argument, argument))
    refused_with(outcome(conn, prefix="no spaces"), "topic_prefix")
    # A JSON null is a payload, as the SDK's None is.
    assert outcome(conn, payload="null") is None


def test_sizes_are_the_registered_limits(conn: psycopg.Connection[Any]) -> None:
    register(conn, "default", payload_limit=100)
    text = '"' + "x" * 98 + '"'  # 100 bytes as JSON text
    assert outcome(conn, payload=text) is None
    message = refused_with(outcome(conn, payload='"' + "x" * 99 + '"'), "payload")
    assert "is 101 bytes encoded, the limit (max_payload_bytes) is 100" in message
    register(conn, "default", payload_limit=512_000, message_limit=2048)
    message = refused_with(outcome(conn, payload='"' + "x" * 3000 + '"'), "payload")
    assert "the limit (max_message_bytes) is 2048" in message


def test_a_queue_needs_a_relay_of_its_deployment(conn: psycopg.Connection[Any]) -> None:
    message = refused_with(outcome(conn, queue="reports"), "queue")
    assert "has no relay in deployment 'rules' (registered: default)" in message
    error = outcome(conn, prefix="nobody")
    assert isinstance(error, errors.ObjectNotInPrerequisiteState), error
    assert "no relay of this deployment has registered" in str(error)
    assert "tenantq outbox relay --once" in (error.diag.message_hint or "")


@pytest.mark.parametrize(
    ("queue", "job_type", "tenant", "key", "payload_size", "scheduled"),
    [
        ("q", "t", "a", None, 1, False),
        ("default", "send_email", "acme", "order-1", 200, True),
        ("q" * 64, "j" * 128, "t" * 128, "😀" * 256, 8_200, True),
        ("q" * 64, "j" * 128, "t" * 128, None, 1_048_600, False),
    ],
)
def test_what_it_accepts_fits_the_relays_limit(
    conn: psycopg.Connection[Any],
    queue: str,
    job_type: str,
    tenant: str,
    key: str | None,
    payload_size: int,
    scheduled: bool,
) -> None:
    """Refused below the encoder's largest envelope of the job (a spread tenant's key with the
    highest shard), accepted a little above it."""
    payload = '"' + "x" * (payload_size - 2) + '"' if payload_size >= 2 else "1"
    stored = conn.execute("SELECT convert_to(%s::jsonb::text, 'UTF8')", (payload,)).fetchone()
    assert stored is not None
    now = dt.datetime.now(dt.UTC)
    run_after = now + dt.timedelta(days=300) if scheduled else None
    largest = len(
        DEFAULT_CODEC.encode_record(
            {
                "job_id": str(uuid.uuid4()),
                "queue": queue,
                "job_type": job_type,
                "tenant_id": tenant,
                "partition_key": f"{tenant}#1023",
                "payload": bytes(stored[0]),
                "created_at": now,
                "run_after": run_after,
                "max_attempts": None,
                "idempotency_key": key,
                "trace_context": {},
                "replay_count": 0,
                "attributes": {},
            }
        )
    )
    arguments = {"queue": queue, "job_type": job_type, "tenant": tenant, "key": key,
                 "payload": payload, "run_after": run_after}  # fmt: skip
    register(conn, queue, payload_limit=10_000_000, message_limit=largest - 1)
    refused_with(outcome(conn, **arguments), "max_message_bytes")
    register(conn, queue, payload_limit=10_000_000, message_limit=largest + 128)
    assert outcome(conn, **arguments) is None


def test_an_idempotency_key_names_one_job(conn: psycopg.Connection[Any]) -> None:
    first = enqueue(conn, key="order-7", payload='{"b": 2, "a": [1, 2.50]}')
    # The same JSON value written otherwise (key order, spacing) is the same payload.
    assert enqueue(conn, key="order-7", payload='{"a":[1,2.50],"b":2}') == first
    # A job the Python SDK wrote with the key (compact JSON): the same value is that job.
    conn.execute(
        "UPDATE tenantq_jobs SET payload = %s, payload_sha256 = sha256(%s) WHERE id = %s",
        (b'{"a":[1,2.5],"b":2}', b'{"a":[1,2.5],"b":2}', first),
    )
    assert enqueue(conn, key="order-7", payload='{"a": [1, 2.5], "b": 2}') == first
    for other in ({"payload": '{"a": 1}'}, {"tenant": "beta"}, {"job_type": "refund"}):
        error = outcome(conn, key="order-7", **other)
        assert isinstance(error, errors.UniqueViolation), error
        assert f"already names job {first}" in str(error)
    # Another queue or another deployment is another key space.
    register(conn, "reports")
    register(conn, "default", prefix="elsewhere")
    assert enqueue(conn, key="order-7", queue="reports") != first
    assert enqueue(conn, key="order-7", prefix="elsewhere") != first


def enqueue_into(results: list[uuid.UUID], conn: psycopg.Connection[Any], key: str) -> None:
    results.append(enqueue(conn, key=key))


def test_concurrent_enqueues_of_one_key_make_one_job(database_url: str) -> None:
    url = psycopg_url(database_url)
    with psycopg.connect(url, autocommit=True) as setup:
        register(setup, "default")
    try:
        for commit_first in (True, False):
            key = f"race-{uuid.uuid4()}"
            with psycopg.connect(url) as first, psycopg.connect(url) as second:
                first_id = enqueue(first, key=key)
                results: list[uuid.UUID] = []
                waiting = threading.Thread(target=enqueue_into, args=(results, second, key))
                waiting.start()
                waiting.join(0.5)
                assert waiting.is_alive(), "the second enqueue waits for the first transaction"
                if commit_first:
                    first.commit()
                else:
                    first.rollback()
                waiting.join(10)
                second.commit()
                # Committed: its job is the answer. Rolled back: the key was free again.
                assert (results[0] == first_id) is commit_first
    finally:
        with psycopg.connect(url, autocommit=True) as cleanup:
            cleanup.execute("DELETE FROM tenantq_jobs WHERE deployment = %s", (PREFIX,))
            cleanup.execute("DELETE FROM tenantq_outbox_queues WHERE deployment = %s", (PREFIX,))


def test_it_is_written_as_the_job_and_an_entry_without_its_record(
    conn: psycopg.Connection[Any],
) -> None:
    run_after = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    job_id = enqueue(conn, payload='{"b": 2, "a": 1.50}', key="k", run_after=run_after)
    assert job_id.version == 7
    assert abs((job_id.int >> 80) - dt.datetime.now(dt.UTC).timestamp() * 1000) < 60_000
    job = conn.execute(
        "SELECT state::text, payload, payload_sha256 = sha256(payload), partition_key, "
        "run_after, idempotency_key, max_attempts, origin_topic FROM tenantq_jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert job == ("pending", b'{"a": 1.50, "b": 2}', True, "acme", run_after, "k", 8, None)
    entry = conn.execute(
        "SELECT main_topic, tenant_id, num_nulls(topic, partition, key, value, headers) "
        "FROM tenantq_outbox WHERE job_id = %s",
        (job_id,),
    ).fetchone()
    assert entry == ("rules.default", "acme", 5)


def test_it_runs_with_the_callers_privileges_and_its_own_names(
    conn: psycopg.Connection[Any],
) -> None:
    definition = conn.execute(
        "SELECT prosecdef, proconfig FROM pg_proc WHERE proname = 'tenantq_enqueue'"
    ).fetchone()
    assert definition == (False, ["search_path=pg_catalog, pg_temp"])
    comment = conn.execute(
        "SELECT obj_description('tenantq_enqueue'::regproc, 'pg_proc')"
    ).fetchone()
    assert comment is not None and "docs/enqueue-from-sql.md" in comment[0]

    # Look-alikes ahead of tenantq's tables and of pg_catalog on the caller's path are not used.
    conn.execute("CREATE SCHEMA shadow")
    conn.execute("CREATE TABLE shadow.tenantq_jobs (id uuid)")
    conn.execute(
        "CREATE FUNCTION shadow.sha256(bytea) RETURNS bytea LANGUAGE sql "
        "AS $$ SELECT '\\x00'::bytea $$"
    )
    conn.execute("SET LOCAL search_path = shadow, pg_catalog, public")
    job_id = enqueue(conn)
    stored = conn.execute(
        "SELECT public.tenantq_jobs.payload_sha256 = pg_catalog.sha256(payload) "
        "FROM public.tenantq_jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert stored == (True,)
    assert conn.execute("SELECT count(*) FROM shadow.tenantq_jobs").fetchone() == (0,)

    # A role may call it only with the privileges the documentation lists.
    role = sql.Identifier(f"tenantq_writer_{uuid.uuid4().hex[:8]}")
    conn.execute("SET LOCAL search_path = public")
    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
    try:
        conn.execute(sql.SQL("SET ROLE {}").format(role))
        with pytest.raises(errors.InsufficientPrivilege):
            with conn.transaction():
                enqueue(conn)
        conn.execute("RESET ROLE")
        for grant in DOCUMENTED_GRANTS:
            conn.execute(sql.SQL(grant).format(role=role))
        conn.execute(sql.SQL("SET ROLE {}").format(role))
        granted = enqueue(conn, key="granted")
        assert enqueue(conn, key="granted") == granted
    finally:
        conn.rollback()  # the role and its grants go with the transaction


#: The grants of docs/enqueue-from-sql.md, for a role of the caller's services.
DOCUMENTED_GRANTS = (
    "GRANT SELECT ON tenantq_outbox_queues TO {role}",
    "GRANT INSERT, SELECT (id, deployment, queue, job_type, tenant_id, payload, payload_sha256,"
    " idempotency_key) ON tenantq_jobs TO {role}",
    "GRANT INSERT ON tenantq_outbox TO {role}",
    "GRANT USAGE ON SEQUENCE tenantq_outbox_id_seq TO {role}",
)
