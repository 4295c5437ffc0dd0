"""Guarantee: the downgrade of the migration that installs ``tenantq_enqueue`` drops the
function and the queues relays registered, and restores the outbox's columns; it refuses
while an entry the function wrote still waits for its record (the previous release's relays
could not publish it), rather than losing it. Upgrading again installs the function again."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.exc import DBAPIError
from support import migrate_to, migrated_database

from tenantq.store.engine import psycopg_url

BEFORE = "0011"
FUNCTION = "tenantq_enqueue(text, text, text, jsonb, text, timestamptz, text)"


@pytest.fixture
def database(servers: tuple[str, str]) -> Iterator[str]:
    _, server_url = servers
    with migrated_database(server_url, "tenantq_sql_enqueue_") as url:
        yield url


def installed(db: psycopg.Connection[object]) -> tuple[object, ...]:
    row = db.execute(
        "SELECT to_regprocedure(%s) IS NOT NULL, to_regclass('tenantq_outbox_queues') IS NOT NULL,"
        " (SELECT bool_and(is_nullable = 'YES') FROM information_schema.columns"
        "  WHERE table_name = 'tenantq_outbox' AND column_name IN ('topic', 'partition', 'value',"
        "  'headers'))",
        (FUNCTION,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_downgrade_drops_the_function_unless_entries_wait(database: str) -> None:
    with psycopg.connect(psycopg_url(database), autocommit=True) as db:
        assert installed(db) == (True, True, True)
        db.execute(
            "INSERT INTO tenantq_outbox_queues (deployment, queue, main_topic, max_payload_bytes,"
            " max_message_bytes, default_max_attempts) VALUES ('tenantq', 'default',"
            " 'tenantq.default', 512000, 1000000, 8)"
        )
        db.execute("SELECT tenantq_enqueue('default', 'send_email', 'acme', '{}')")

        with pytest.raises(DBAPIError, match="written by tenantq_enqueue are not published"):
            migrate_to(database, BEFORE, down=True)
        assert installed(db) == (True, True, True)

        db.execute("DELETE FROM tenantq_jobs")  # its entry goes with it
        migrate_to(database, BEFORE, down=True)
        assert installed(db) == (False, False, False)

        migrate_to(database, "head")
        assert installed(db) == (True, True, True)
