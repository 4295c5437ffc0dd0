"""Who is calling: X-Forwarded-For and X-Forwarded-Proto are believed from trusted proxies
only; the client is the first address, from the nearest hop outwards, that is not a proxy."""

from __future__ import annotations

from typing import Any

from tenantq.web.caller import Caller, Proxies


def scope(peer: str, scheme: str = "http", **headers: str) -> dict[str, Any]:
    return {
        "type": "http",
        "client": (peer, 40000),
        "scheme": scheme,
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    proxies = Proxies([])
    spoofed = scope("203.0.113.9", x_forwarded_for="10.0.0.1", x_forwarded_proto="https")
    assert proxies.caller(spoofed) == Caller("203.0.113.9", False)
    assert proxies.caller(scope("203.0.113.9", scheme="https")) == Caller("203.0.113.9", True)


def test_a_trusted_proxy_names_the_client_and_the_scheme() -> None:
    proxies = Proxies(["10.0.0.0/8"])
    forwarded = scope(
        "10.0.0.2", x_forwarded_for="198.51.100.7, 10.0.0.3", x_forwarded_proto="https"
    )
    assert proxies.caller(forwarded) == Caller("198.51.100.7", True)
    # What the client wrote left of its own address is not believed.
    injected = scope("10.0.0.2", x_forwarded_for="10.9.9.9, 198.51.100.7")
    assert proxies.caller(injected) == Caller("198.51.100.7", False)
    # An untrusted peer's headers are not read at all.
    assert proxies.caller(scope("198.51.100.8", x_forwarded_proto="https")).https is False
    assert proxies.caller(scope("testclient")).address == "testclient"
