"""Alembic environment of tenantq: runs online against the connection the caller passes in
``config.attributes["connection"]`` (see tenantq.store.migrate)."""

from __future__ import annotations

from alembic import context

from tenantq.store.models import metadata

VERSION_TABLE = "tenantq_alembic_version"


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
