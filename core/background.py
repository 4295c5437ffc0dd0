"""Background services: work that runs beside a worker's members, once per ``tenantq worker``.

The supervisor of ``tenantq worker`` starts them before its members and stops them after
(``tenantq.consumer.supervisor``). Each service owns its thread and its database connection,
survives a database or broker outage (it logs the change of state and tries again later), and
coordinates with the services of other workers itself (an advisory lock, a compare-and-set), so
that any number of ``tenantq worker`` processes may run the same services.

This module is what the services are built on (the ``BackgroundService`` protocol and the
``ServiceLoop`` most of them run as), low enough for every feature to import; which services a
worker runs is decided above the features, in ``tenantq.services``.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Iterable
from typing import Protocol, TypeVar

log = logging.getLogger("tenantq.background")


class BackgroundService(Protocol):
    """A service the supervisor runs: ``start`` returns at once, ``stop`` within ``timeout``."""

    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


Notification = TypeVar("Notification", covariant=True)


class Listener(Protocol[Notification]):
    """A database connection that ``LISTEN``s (a psycopg connection): its socket, and the
    notifications it holds or reads within ``timeout`` seconds."""

    def fileno(self) -> int: ...

    def notifies(self, *, timeout: float | None = None) -> Iterable[Notification]: ...


#: First pause after a failed round; it doubles per failure up to ``MAX_BACKOFF_SECONDS``.
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0


class ServiceLoop:
    """A ``BackgroundService`` as a loop of rounds in a thread of its own.

    A subclass implements ``run_round`` (one round of work; returns the seconds to wait
    before the next) and ``reset`` (drop its connections after a failure; the next round
    reconnects). A round that raises is weather, not a crash: the loop logs one line when a
    dependency goes down (``outage`` names it) and one when it is back, and tries again with
    a capped exponential backoff. ``stop`` wakes the loop and waits up to its timeout; the
    thread is a daemon, so a round stuck in a driver call cannot keep the process alive. A
    round that waits on a socket waits through ``wait_readable`` (a ``LISTEN`` connection
    through ``wait_for_notifies``), which ``stop`` ends at once too.

    Thread ownership: everything but ``_stopping``, ``_thread`` and ``_wake_sender`` belongs
    to the loop's thread once ``start`` has returned.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"tenantq-{name}", daemon=True)
        self._down: str | None = None
        # ``stop`` writes a byte to the sender to end a ``wait_readable`` of the loop's thread.
        self._wake_sender, self._wake_receiver = socket.socketpair()
        self._wake_sender.setblocking(False)

    @property
    def name(self) -> str:
        return self._name

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called: long rounds look at it to end early."""
        return self._stopping.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stopping.set()
        # Closed by an earlier stop; a full buffer means a wake-up is pending already.
        with contextlib.suppress(OSError):
            self._wake_sender.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning(
                "%s did not stop within %.1fs; leaving it to the process exit", self._name, timeout
            )
        else:  # the loop's thread is done with the receiver
            self._wake_sender.close()
            self._wake_receiver.close()

    def run_round(self) -> float:
        """One round of work; returns the seconds to wait before the next."""
        raise NotImplementedError

    def wait_readable(self, fileno: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``fileno`` to be readable, or for ``stop``;
        True when it is readable. For a round that waits on a socket: a plain blocking wait
        would hold ``stop`` (and whoever closes the service) for the rest of its timeout."""
        if self._stopping.is_set():
            return False
        with selectors.DefaultSelector() as selector:
            selector.register(fileno, selectors.EVENT_READ)
            selector.register(self._wake_receiver, selectors.EVENT_READ)
            ready = selector.select(timeout)
        return any(key.fd == fileno for key, _ in ready)

    def wait_for_notifies(
        self, connection: Listener[Notification], timeout: float
    ) -> list[Notification]:
        """The notifications ``connection`` holds, else those it receives within ``timeout``
        seconds (none when ``stop`` ends the wait). A notification that arrived while the
        connection ran a query is already read off its socket: it is returned at once, not
        after a wait for the socket."""
        received = list(connection.notifies(timeout=0))
        if not received and self.wait_readable(connection.fileno(), timeout):
            received = list(connection.notifies(timeout=0))
        return received

    def reset(self) -> None:
        """Drop connections after a failed round (the next round opens them again)."""

    def close(self) -> None:
        """Release everything when the loop ends (called in its thread)."""
        self.reset()

    def outage(self, error: BaseException) -> str:
        """What a failed round says is down: ``PostgreSQL``, ``Kafka`` or the error's class."""
        return outage_of(error)

    def _main(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        try:
            while not self._stopping.is_set():
                try:
                    wait = self.run_round()
                except Exception as error:
                    down = self.outage(error)
                    if down != self._down:
                        # One line per outage, not one per retry; the first also says why.
                        log.warning(
                            "%s: %s unavailable (%s: %s); retrying with backoff up to %.0fs",
                            self._name, down, type(error).__name__, _first_line(error),
                            MAX_BACKOFF_SECONDS,
                        )  # fmt: skip
                        self._down = down
                    self._reset_quietly()
                    wait, backoff = backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)
                else:
                    if self._down is not None:
                        log.warning("%s: %s is back", self._name, self._down)
                        self._down = None
                    backoff = FIRST_BACKOFF_SECONDS
                self._stopping.wait(max(0.0, wait))
        finally:
            self._close_quietly()

    def _reset_quietly(self) -> None:
        try:
            self.reset()
        except Exception:  # a broken connection may fail to close; it is gone either way
            log.debug("%s: reset failed", self._name, exc_info=True)

    def _close_quietly(self) -> None:
        try:
            self.close()
        except Exception:
            log.debug("%s: close failed", self._name, exc_info=True)


#: tenantq's errors that say Kafka is the dependency at fault.
KAFKA_ERRORS = frozenset({"KafkaUnavailable", "KafkaAccessRefused"})


def outage_of(error: BaseException) -> str:
    """The dependency an error says is down (by the error's module, no driver import)."""
    module = type(error).__module__
    if module.startswith(("psycopg", "sqlalchemy")):
        return "PostgreSQL"
    if module.startswith("confluent_kafka") or type(error).__name__ in KAFKA_ERRORS:
        return "Kafka"
    return type(error).__name__


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
