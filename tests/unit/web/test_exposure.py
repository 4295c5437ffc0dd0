"""What the bind address implies: a token shorter than 16 characters stops the console from
starting beyond localhost and is a warning on localhost; the Host names answered default to
the bind address and localhost names; Host headers are read port aside."""

from __future__ import annotations

import socket

import pytest

from tenantq.errors import ConfigurationError
from tenantq.settings import Settings, WebSettings
from tenantq.web.exposure import allowed_hosts, host_name, is_local, start_warnings


def settings(**web: object) -> Settings:
    return Settings(
        kafka_bootstrap_servers="b:1", database_url="postgresql://x@h/d", web=WebSettings(**web)
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "oncall.example.com"])
def test_a_short_token_is_refused_beyond_localhost(host: str) -> None:
    with pytest.raises(ConfigurationError, match="at least 16"):
        start_warnings(settings(host=host, token="x"))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_short_token_is_a_warning_on_localhost(host: str) -> None:
    (warning,) = start_warnings(settings(host=host, token="short"))
    assert "5 characters" in warning and "localhost only" in warning
    assert start_warnings(settings(host=host, token="x" * 16)) == []
    assert start_warnings(settings(host=host, token=None)) == []


def test_every_interface_without_allowed_hosts_is_a_warning() -> None:
    (warning,) = start_warnings(settings(host="0.0.0.0", token="x" * 24))
    assert "TENANTQ_WEB__ALLOWED_HOSTS" in warning
    assert (
        start_warnings(settings(host="0.0.0.0", token="x" * 24, allowed_hosts=["a.example"])) == []
    )


def test_allowed_hosts_default_to_the_bind_address_and_localhost() -> None:
    assert allowed_hosts(settings()) == {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts(settings(host="10.1.2.3")) == {"localhost", "127.0.0.1", "::1", "10.1.2.3"}
    assert socket.gethostname().lower() in (allowed_hosts(settings(host="0.0.0.0")) or ())
    assert allowed_hosts(settings(allowed_hosts=["Oncall.Example.com."])) == {"oncall.example.com"}
    assert allowed_hosts(settings(allowed_hosts=["*"])) is None


def test_host_headers_are_read_port_aside() -> None:
    assert host_name("Example.COM:8765") == "example.com"
    assert host_name("example.com.") == "example.com"
    assert host_name("[::1]:8765") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    for malformed in ("", "[::1", "127.0.0.1:abc", "127.0.0.1:8765@evil", "a b", "a/b"):
        assert host_name(malformed) == "", malformed
    assert is_local("127.0.0.1") and not is_local("0.0.0.0") and not is_local("example.com")
