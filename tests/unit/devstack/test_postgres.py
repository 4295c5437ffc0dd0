"""PostgreSQL's options, client authentication and URLs, as the dev stack writes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from tenantq.devstack.postgres import (
    SECURE_HBA,
    ServerTls,
    embedded_bin_dir,
    replacement_bin_dir,
    server_major,
    server_options,
    url_for,
)
from tenantq.errors import DevStackError


def test_server_options_bind_loopback_and_keep_wal_for_a_standby() -> None:
    options = server_options(25001, Path("/home/run"))
    assert options.startswith("-h 127.0.0.1 -p 25001 -k /home/run ")
    assert "-c wal_keep_size=256MB" in options
    assert "ssl" not in options


def test_a_secure_server_serves_tls_and_stores_scram_verifiers() -> None:
    tls = ServerTls(Path("/t/server.pem"), Path("/t/my key"), Path("/t/ca.pem"))
    options = server_options(25001, Path("/run"), tls)
    assert "-c ssl=on -c ssl_cert_file=/t/server.pem -c ssl_key_file='/t/my key'" in options
    assert "-c password_encryption=scram-sha-256" in options


def test_a_secure_server_lets_in_tls_with_a_password_and_nothing_else() -> None:
    rules = [line.split() for line in SECURE_HBA.splitlines() if not line.startswith("#")]
    assert rules, SECURE_HBA
    assert {rule[0] for rule in rules} == {"local", "hostssl"}
    assert {rule[-1] for rule in rules} == {"scram-sha-256"}


def test_one_server_has_a_plain_url() -> None:
    assert url_for([25001]) == "postgresql://postgres@127.0.0.1:25001/tenantq"


def test_a_primary_and_standby_share_one_url_that_asks_for_the_writable_one() -> None:
    url = url_for([25001, 25002])
    assert url == (
        "postgresql://postgres@/tenantq?host=127.0.0.1,127.0.0.1&port=25001,25002"
        "&target_session_attrs=read-write"
    )
    parsed = conninfo_to_dict(url)
    assert (parsed["host"], parsed["port"]) == ("127.0.0.1,127.0.0.1", "25001,25002")
    assert parsed["target_session_attrs"] == "read-write"


def test_a_secure_url_carries_the_password_and_verifies_the_server() -> None:
    url = url_for([25001, 25002], "jobs", password="pw", ca_cert=Path("/h o/ca.pem"))
    parsed = conninfo_to_dict(url)
    assert parsed["password"] == "pw"
    assert parsed["dbname"] == "jobs"
    assert parsed["sslmode"] == "verify-full"
    assert parsed["sslrootcert"] == "/h o/ca.pem"


def test_the_wheels_server_reports_its_major_version() -> None:
    major = server_major(embedded_bin_dir())
    assert major is not None and major.isdigit() and int(major) >= 14


def test_a_data_directory_whose_binaries_are_gone_runs_on_this_installs_of_its_version(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "PG_VERSION").write_text(f"{server_major(embedded_bin_dir())}\n")
    chosen = replacement_bin_dir(tmp_path / "data", "/removed/venv/bin", secure=False)
    assert chosen == embedded_bin_dir()
    assert (chosen / "pg_ctl").exists()


def test_a_data_directory_of_another_version_is_never_handed_to_this_installs_binaries(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "PG_VERSION").write_text("9\n")
    with pytest.raises(DevStackError, match="data is PostgreSQL 9.*remove .* afresh"):
        replacement_bin_dir(tmp_path / "data", "/removed/venv/bin", secure=False)
