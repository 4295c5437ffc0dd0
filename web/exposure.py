"""What the console's bind address implies: the token it needs, and the Host names it answers.

| bind address (``web.host``)   | token shorter than 16 characters | Host names answered (default) |
| ----------------------------- | -------------------------------- | ----------------------------- |
| 127.0.0.1, ::1, localhost     | a warning at start               | localhost names               |
| 0.0.0.0, :: (every interface) | refused: the console won't start | localhost names and this      |
|                               |                                  | machine's host name           |
| any other address or name     | refused                          | it, and localhost names       |

Localhost names are ``localhost``, ``127.0.0.1`` and ``::1``. ``web.allowed_hosts`` replaces
the default (``["*"]``: any Host). The Host check is what stops DNS rebinding: a page of
another site whose name was re-pointed at this machine reaches the console under that
site's name, which is not on the list.
"""

from __future__ import annotations

import ipaddress
import re
import socket

from tenantq.errors import ConfigurationError
from tenantq.settings import Settings

#: Shortest token accepted on an address other than localhost.
MIN_TOKEN_LENGTH = 16
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def is_local(host: str) -> bool:
    """Whether binding ``host`` serves this machine only."""
    name = host.strip().lower().strip("[]")
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def start_warnings(settings: Settings) -> list[str]:
    """What to warn about when the console starts on ``settings.web.host``; a
    ``ConfigurationError`` for a token too short to serve beyond this machine."""
    web = settings.web
    warnings: list[str] = []
    if web.token is not None:
        length = len(web.token.get_secret_value())
        if length < MIN_TOKEN_LENGTH:
            if not is_local(web.host):
                raise ConfigurationError(
                    f"TENANTQ_WEB__TOKEN has {length} characters: at least {MIN_TOKEN_LENGTH} "
                    f"are needed to serve on {web.host} (e.g. `openssl rand -hex 24`)"
                )
            warnings.append(
                f"TENANTQ_WEB__TOKEN has {length} characters, fewer than {MIN_TOKEN_LENGTH}: "
                "acceptable on localhost only"
            )
    if not web.allowed_hosts and web.host.strip() in WILDCARD_ADDRESSES:
        names = ", ".join(sorted(allowed_hosts(settings) or ()))
        warnings.append(
            f"serving on every interface, the console answers to {names} only: list the names "
            "people use in TENANTQ_WEB__ALLOWED_HOSTS"
        )
    return warnings


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The Host names (port aside, lower case) the console answers to; None for any."""
    configured = settings.web.allowed_hosts
    if "*" in configured:
        return None
    if configured:
        return frozenset(configured)
    bind = settings.web.host.strip().lower().strip("[]")
    if bind in WILDCARD_ADDRESSES:
        return LOCAL_NAMES | {socket.gethostname().lower()}
    return LOCAL_NAMES | {bind}


def host_name(header: str) -> str:
    """The name of a ``Host`` header: ``Example.com:8765`` -> ``example.com``,
    ``[::1]:8765`` -> ``::1``; "" for anything else (never a name the console answers to)."""
    match = _HOST_HEADER.match(header.strip().lower())
    if match is None:
        return ""
    return (match["address"] or match["name"]).rstrip(".")


_HOST_HEADER = re.compile(
    r"^(?:\[(?P<address>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::[0-9]{1,5})?$"
)
