"""Where the primary's history stands against its standbys.

With asynchronous replication a standby is behind its primary, and a failover to it loses
whatever it had not received: the new primary goes on from an earlier point of the old one's
history, on a new timeline. The worker reads here, on the primary, which timeline the server
is on (a new one means a failover happened) and how far its standbys have flushed the WAL, so
that it commits Kafka offsets only behind state the standbys hold
(``worker.offsets_wait_for_standbys``).

Positions are bytes of WAL since the start of the cluster's history (an ``pg_lsn`` as a
number). The standbys' positions come from ``pg_stat_replication``, whose positions only a
superuser or a member of ``pg_read_all_stats`` (``pg_monitor``) may see: for any other role
they are NULL, and counted here as ``hidden``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

#: The server's timeline (the first eight hex digits of the current WAL segment's name), the
#: WAL written so far, and the flush position of the ``standbys``-th most advanced standby
#: (NULL when fewer stream). ``pg_basebackup`` streams are not standbys (they cannot be
#: promoted) and are left out; their ``application_name`` is the program's own unless set.
REPLICATION_POSITION = """
SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
       (SELECT pg_wal_lsn_diff(flush_lsn, '0/0')::bigint
        FROM pg_stat_replication
        WHERE flush_lsn IS NOT NULL AND application_name <> 'pg_basebackup'
        ORDER BY flush_lsn DESC
        OFFSET %(skip)s LIMIT 1),
       (SELECT count(*) FROM pg_stat_replication
        WHERE flush_lsn IS NULL AND state = 'streaming')
"""


@dataclass(frozen=True)
class ReplicationPosition:
    """One reading of the primary: its timeline, the WAL it has written, and what the
    standbys asked about have flushed."""

    timeline: int
    written: int
    #: The flush position of the least advanced of the standbys asked about (None: fewer of
    #: them stream).
    standbys_flushed: int | None
    #: Streaming standbys whose positions this role may not see.
    hidden: int


def replication_position(connection: psycopg.Connection[Any], standbys: int) -> ReplicationPosition:
    """Where the primary stands, and the flush position of its ``standbys``-th most advanced
    standby (``REPLICATION_POSITION``). Raises psycopg's error on a standby (it writes no
    WAL of its own) or a lost connection."""
    row = connection.execute(REPLICATION_POSITION, {"skip": max(0, standbys - 1)}).fetchone()
    assert row is not None
    timeline, written, flushed, hidden = row
    return ReplicationPosition(
        int(timeline), int(written), None if flushed is None else int(flushed), int(hidden)
    )
