"""Advisory lock keys of tenantq's background services, in one place.

Postgres advisory locks take two 32-bit keys. The first names the service (a constant per
service, ``0x7471....``: "tq" and a number, unlikely to collide with an application's own
locks), the second the thing it serves: the CRC-32 of a queue's main topic for the outbox
relay (one relay per queue and topic prefix), the CRC-32 of the topic prefix for the pruner
(one per deployment: each prunes its own rows by its own policy).

Session-level locks (``pg_try_advisory_lock``) are held by a service's own connection: if the
process dies or its connection drops, Postgres releases the lock and a standby takes over.
"""

from __future__ import annotations

import zlib
from typing import Any

import psycopg

#: One active outbox relay per queue (second key: the queue's main topic).
OUTBOX_RELAY = 0x74710001
#: One active pruner per deployment (second key: the topic prefix).
RETENTION_PRUNER = 0x74710002

ADVISORY_TRY_LOCK = "SELECT pg_try_advisory_lock(%(namespace)s::int, %(key)s::int)"
ADVISORY_UNLOCK = "SELECT pg_advisory_unlock(%(namespace)s::int, %(key)s::int)"


def name_key(name: str) -> int:
    """A stable signed 32-bit key of ``name`` (CRC-32, the same in every process)."""
    value = zlib.crc32(name.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def try_lock(connection: psycopg.Connection[Any], namespace: int, key: int) -> bool:
    """Take the session-level advisory lock (namespace, key) if it is free; never waits."""
    row = connection.execute(ADVISORY_TRY_LOCK, {"namespace": namespace, "key": key}).fetchone()
    if not connection.autocommit:
        connection.commit()
    return bool(row and row[0])


def unlock(connection: psycopg.Connection[Any], namespace: int, key: int) -> None:
    """Release a lock taken with ``try_lock`` on this connection."""
    connection.execute(ADVISORY_UNLOCK, {"namespace": namespace, "key": key})
    if not connection.autocommit:
        connection.commit()
