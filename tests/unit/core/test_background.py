"""``ServiceLoop``: rounds until stopped, one log line when a dependency goes down and one
when it is back (not one per retry), a reset after each failure, and a stop within its
timeout."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from tenantq import background
from tenantq.background import ServiceLoop, outage_of


class PostgresDown(Exception):
    """Named like a driver error by its module, as psycopg's are."""


PostgresDown.__module__ = "psycopg.errors"


class Flaky(ServiceLoop):
    """Fails its first ``failures`` rounds, then succeeds; counts rounds and resets."""

    def __init__(self, failures: int) -> None:
        super().__init__("flaky")
        self.failures = failures
        self.rounds = 0
        self.resets = 0
        self.closed = threading.Event()

    def run_round(self) -> float:
        self.rounds += 1
        if self.rounds <= self.failures:
            raise PostgresDown("connection refused")
        return 0.01

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closed.set()


def test_an_outage_is_two_lines_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(background, "FIRST_BACKOFF_SECONDS", 0.001)
    service = Flaky(failures=4)
    with caplog.at_level(logging.WARNING, logger="tenantq.background"):
        service.start()
        deadline = time.monotonic() + 5
        while service.rounds < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        service.stop(timeout=2)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "flaky: PostgreSQL unavailable (PostgresDown: connection refused)" in lines[0]
    assert lines[1] == "flaky: PostgreSQL is back"
    assert service.resets == 4 and service.closed.is_set()


def test_outages_are_named_by_the_dependency() -> None:
    assert outage_of(PostgresDown()) == "PostgreSQL"
    assert outage_of(ValueError()) == "ValueError"


class SocketWaiter(ServiceLoop):
    """Waits on a socket (as a ``LISTEN`` connection does) for ``wait`` seconds a round."""

    def __init__(self, wait: float) -> None:
        super().__init__("socket-waiter")
        self.wait = wait
        self.peer, self.mine = socket.socketpair()
        self.waiting = threading.Event()
        self.readable: list[bool] = []

    def run_round(self) -> float:
        self.waiting.set()
        readable = self.wait_readable(self.mine.fileno(), self.wait)
        if readable:
            self.mine.recv(64)
        self.readable.append(readable)
        return 0.0


def test_a_round_waiting_on_a_socket_sees_its_data_and_ends_at_once_on_stop() -> None:
    service = SocketWaiter(wait=30.0)
    service.start()
    try:
        assert service.waiting.wait(5)
        service.peer.send(b"notify")
        deadline = time.monotonic() + 5
        while not service.readable and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.readable[:1] == [True]
    finally:
        started = time.monotonic()
        service.stop(timeout=10)
        stopped_in = time.monotonic() - started
        service.peer.close()
        service.mine.close()
    # The round waits 30 s for a socket nobody writes to; stop does not wait that out.
    assert stopped_in < 2.0
