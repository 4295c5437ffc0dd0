"""Who is calling: the client's address and whether it came over https, believing
``X-Forwarded-For`` and ``X-Forwarded-Proto`` only from ``web.trusted_proxies``.

A header anyone can send cannot be trusted from anyone: without a trusted proxy the address is
the connection's peer and https means the console itself serves TLS. ``tenantq web`` turns
uvicorn's own proxy-header handling off, so that this is the only place that decides.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import Scope

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Caller:
    """The client of a request."""

    address: str
    https: bool


class Proxies:
    """The reverse proxies whose forwarding headers are believed."""

    def __init__(self, networks: Iterable[str]) -> None:
        self._networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(network, strict=False) for network in networks
        )

    def trusted(self, address: str) -> bool:
        """Whether ``address`` is one of the trusted proxies."""
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(parsed in network for network in self._networks)

    def caller(self, scope: Scope) -> Caller:
        """The client of the request ``scope``."""
        peer = scope.get("client")
        address = str(peer[0]) if peer else "unknown"
        https = scope.get("scheme") == "https"
        if not self._networks or not self.trusted(address):
            return Caller(address, https)
        headers = Headers(scope=scope)
        proto = headers.get("x-forwarded-proto")
        if proto:
            # The proxy nearest to us wrote the last value.
            https = proto.split(",")[-1].strip().lower() == "https"
        forwarded = [part.strip() for part in headers.get("x-forwarded-for", "").split(",")]
        # From the nearest hop outwards, the first address that is not a trusted proxy is the
        # client: anything left of it may have been written by the client itself.
        for hop in reversed([part for part in forwarded if part]):
            address = hop
            if not self.trusted(hop):
                break
        return Caller(address[:64], https)
