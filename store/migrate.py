"""``tenantq db upgrade | current``: Alembic, run from the migrations shipped in the package."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from tenantq.settings import Settings

VERSION_TABLE = "tenantq_alembic_version"


def alembic_config() -> Config:
    location = resources.files("tenantq.migrations")
    config = Config()
    config.set_main_option("script_location", str(location))
    return config


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Migrate to ``revision``; returns the revision the database is at afterwards."""
    config = alembic_config()
    with engine.begin() as connection:
        # One migrator at a time: workers may all start with `db upgrade`.
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7346019281)")
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    return current(engine)


def upgrade_database(settings: Settings, revision: str = "head") -> str | None:
    """``upgrade`` of the settings' database, on an engine of its own (disposed after)."""
    from tenantq.store.engine import create_sqlalchemy_engine

    engine = create_sqlalchemy_engine(settings)
    try:
        return upgrade(engine, revision)
    finally:
        engine.dispose()


def current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def head() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
