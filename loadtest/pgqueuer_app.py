"""PgQueuer's side of the throughput benchmark: its no-op entrypoint and its worker process.

``python loadtest/pgqueuer_app.py --batch-size 100`` is what ``pgq run pgqueuer_app:create
--batch-size 100`` does (``pgqueuer.run`` on uvloop, one ``QueueManager`` on one asyncpg
connection, everything else at PgQueuer's defaults). The CLI itself is not used because
PgQueuer 1.6's ``pgq run`` fails at start-up in this venv (typer 0.29, which tenantq's CLI
brings: its ``--log-level`` parser hands ``setup_fancy_logger`` a str, not the enum).
The connection comes from the libpq variables (``PGHOST``, ``PGPORT``, ``PGUSER``,
``PGDATABASE``) as in PgQueuer's quick start.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg  # type: ignore[import-untyped]
import pgqueuer
import uvloop
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

ENTRYPOINT = "noop"


@asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    """The factory ``pgq run`` would be given: a PgQueuer with one async no-op entrypoint."""
    connection = await asyncpg.connect()
    queuer = PgQueuer(AsyncpgDriver(connection))

    # An async handler: PgQueuer runs sync ones in a thread pool, which costs more.
    @queuer.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        return None

    try:
        yield queuer
    finally:
        await connection.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a PgQueuer worker as `pgq run` does.")
    parser.add_argument("--batch-size", type=int, default=10, help="PgQueuer's default: 10")
    arguments = parser.parse_args(argv)
    # SIGTERM/SIGINT stop it gracefully (pgqueuer.run installs the handlers).
    uvloop.run(pgqueuer.run(create, batch_size=arguments.batch_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
