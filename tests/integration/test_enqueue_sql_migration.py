"""Guarantee: the downgrade of the migration that installs ``tenantq_enqueue`` drops the
function and the queues relays registered, and restores the outbox's columns; it refuses
while an entry the function wrote still waits for its record (the previous release's relays
could not publish it), rather than losing it. Upgrading again installs the function again."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy.exc import DBAPIError
from support import migrate_to

from tenantq.store.engine import psycopg_url

BEFORE = "0011"
FUNCTION = "tenantq_enqueue(text, text, text, jsonb, text, timestamptz, text)"


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


def test_downgrade_drops_the_function_unless_entries_wait(fresh_database: str) -> None:
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        assert installed(db) == (True, True, True)
        db.execute(
            "INSERT INTO tenantq_outbox_queues (deployment, queue, main_topic, max_payload_bytes,"
            " max_message_bytes, default_max_attempts) VALUES ('tenantq', 'default',"
            " 'tenantq.default', 512000, 1000000, 8)"
        )
        db.execute("SELECT tenantq_enqueue('default', 'send_email', 'acme', '{}')")

        with pytest.raises(DBAPIError, match="written by tenantq_enqueue are not published"):
            migrate_to(fresh_database, BEFORE, down=True)
        assert installed(db) == (True, True, True)

        db.execute("DELETE FROM tenantq_jobs")  # its entry goes with it
        migrate_to(fresh_database, BEFORE, down=True)
        assert installed(db) == (False, False, False)

        migrate_to(fresh_database, "head")
        assert installed(db) == (True, True, True)
