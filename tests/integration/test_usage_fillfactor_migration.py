"""Guarantee: the migration that keeps usage rows on their page leaves nine tenths of each page
of ``tenantq_tenant_usage`` free (room for the claims' new versions of its rows), and its
downgrade gives the table back the default."""

from __future__ import annotations

import psycopg
from support import migrate_to

from tenantq.store.engine import psycopg_url

RELOPTIONS = "SELECT reloptions FROM pg_class WHERE oid = 'tenantq_tenant_usage'::regclass"


def test_usage_pages_keep_room_and_the_downgrade_restores_the_default(
    fresh_database: str,
) -> None:
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        assert db.execute(RELOPTIONS).fetchone() == (["fillfactor=10"],)
    migrate_to(fresh_database, "0013", down=True)
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        assert db.execute(RELOPTIONS).fetchone() == (None,)
    migrate_to(fresh_database, "0014")
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        assert db.execute(RELOPTIONS).fetchone() == (["fillfactor=10"],)
