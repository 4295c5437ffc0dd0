"""Process and port helpers of the dev stack."""

from __future__ import annotations

import os
import random
import signal
import socket
import time
from collections.abc import Callable, Collection
from pathlib import Path

#: Where ports are drawn from when the preferred one is taken: below the kernel's range of
#: local ports for outgoing connections (see ``pick_port``).
_FALLBACK_PORTS_FROM = 20_000


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999


def pick_port(preferred: int, host: str = "127.0.0.1", *, taken: Collection[int] = ()) -> int:
    """``preferred`` when free, else a free port below the kernel's ephemeral range (none of
    ``taken``, the ports this stack has just handed out and not bound yet).

    A port the kernel may hand out as a client's local port is a trap for a server that is
    killed and started again: a client retrying ``127.0.0.1:<port>`` while nothing listens can
    be given that very port and connect to itself, and the server then finds its port taken.
    """
    if preferred not in taken and port_free(preferred, host):
        return preferred
    low, _ = ephemeral_port_range()
    ceiling = max(low, _FALLBACK_PORTS_FROM + 1_000)
    draw = random.Random()
    for _ in range(1_000):
        port = draw.randrange(_FALLBACK_PORTS_FROM, ceiling)
        if port not in taken and port_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped) still answers kill(0): look at its state.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def stop_pid(pid: int, timeout: float = 30.0) -> bool:
    """SIGTERM, wait up to ``timeout``, then SIGKILL. True when the process is gone."""
    if not pid_alive(pid):
        return True
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if wait_until(lambda: not pid_alive(pid), timeout=timeout, interval=0.2):
        return True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return wait_until(lambda: not pid_alive(pid), timeout=10, interval=0.1)


def wait_until(predicate: Callable[[], bool], *, timeout: float, interval: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
