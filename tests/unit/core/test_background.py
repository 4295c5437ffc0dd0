"""``ServiceLoop``: rounds until stopped, one log line when a dependency goes down and one
when it is back (not one per retry), a reset after each failure, and a stop within its
timeout."""

from __future__ import annotations

import logging
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
