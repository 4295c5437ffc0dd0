"""Database URLs: one host, or a primary and its standby in one URL, in the three spellings
operators use; psycopg (libpq) and SQLAlchemy each get one they read as both hosts."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_attempts, conninfo_to_dict
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from tenantq.store.engine import psycopg_url, sqlalchemy_url

TWO_HOSTS = [
    # libpq's own form, as Patroni and managed services print it (SQLAlchemy cannot parse it)
    "postgresql://app:pw@10.0.0.1:5432,10.0.0.2:5433/jobs?target_session_attrs=read-write",
    # host=a,b port=p1,p2 in the query (what `tenantq dev env` prints)
    "postgresql://app:pw@/jobs?host=10.0.0.1,10.0.0.2&port=5432,5433"
    "&target_session_attrs=read-write",
    # SQLAlchemy's repeated host=h:p (libpq would keep only the last)
    "postgresql+psycopg://app:pw@/jobs?host=10.0.0.1:5432&host=10.0.0.2:5433"
    "&target_session_attrs=read-write",
]


@pytest.mark.parametrize("url", TWO_HOSTS)
def test_psycopg_tries_both_hosts_for_the_writable_one(url: str) -> None:
    attempts = conninfo_attempts(conninfo_to_dict(psycopg_url(url)))
    assert [(a["host"], a["port"]) for a in attempts] == [
        ("10.0.0.1", "5432"),
        ("10.0.0.2", "5433"),
    ]
    assert {a["target_session_attrs"] for a in attempts} == {"read-write"}
    assert {(a["user"], a["password"], a["dbname"]) for a in attempts} == {("app", "pw", "jobs")}


@pytest.mark.parametrize("url", TWO_HOSTS)
def test_sqlalchemy_connects_with_both_hosts(url: str) -> None:
    converted = sqlalchemy_url(url)
    engine = create_engine(converted)
    try:
        _, arguments = engine.dialect.create_connect_args(make_url(converted))
    finally:
        engine.dispose()
    assert arguments["host"] == "10.0.0.1,10.0.0.2"
    assert arguments["port"] == "5432,5433"
    assert arguments["target_session_attrs"] == "read-write"
    assert make_url(converted).drivername == "postgresql+psycopg"


def test_one_host_urls_keep_their_shape() -> None:
    url = "postgresql://postgres:p%40ss@127.0.0.1:15432/tenantq?sslmode=require"
    assert psycopg_url(url) == url
    assert sqlalchemy_url(url) == url.replace("postgresql://", "postgresql+psycopg://")
    assert psycopg_url("postgresql+psycopg://u@h:1/d") == "postgresql://u@h:1/d"


def test_a_path_with_a_space_reaches_libpq_intact() -> None:
    url = "postgresql://u@h:1/d?sslmode=verify-full&sslrootcert=/tmp/my%20home/ca.pem"
    assert conninfo_to_dict(psycopg_url(url))["sslrootcert"] == "/tmp/my home/ca.pem"


def test_ipv6_hosts_in_libpq_form() -> None:
    attempts = conninfo_attempts(
        conninfo_to_dict(psycopg_url("postgresql://u@[::1]:5432,[::1]:5433/d"))
    )
    assert [(a["host"], a["port"]) for a in attempts] == [("::1", "5432"), ("::1", "5433")]
