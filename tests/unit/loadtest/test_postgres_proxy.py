"""Guarantee: the fault suite's PostgreSQL proxy (``loadtest/postgres_proxy.py``) relays the
protocol unchanged, adds the latency it is set to per round trip, holds what clients send
until released, and cuts exactly the requests it is told to: after the server ran them
(the answer withheld, the client reset) or before (the server never sees them)."""

from __future__ import annotations

import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from postgres_proxy import SSL_REQUEST, PostgresProxy  # noqa: E402


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    head = read_exactly(sock, 5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], read_exactly(sock, length - 4)


class FakeBackend(socketserver.ThreadingTCPServer):
    """Answers as PostgreSQL frames them: one byte to an SSL request ('N', or 'S' and then
    an echo of raw bytes), AuthenticationOk + ReadyForQuery to a startup, CommandComplete +
    ReadyForQuery to each request (up to Sync, or a simple Query). Records each request's
    statement text: a Parse's, or that of the prepared statement a Bind names."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, accept_ssl: bool = False) -> None:
        self.accept_ssl = accept_ssl
        self.received: list[str] = []
        super().__init__(("127.0.0.1", 0), _BackendHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)


class _BackendHandler(socketserver.BaseRequestHandler):
    server: FakeBackend

    def handle(self) -> None:
        sock: socket.socket = self.request
        prepared: dict[str, str] = {}
        try:
            while True:
                (length,) = struct.unpack("!i", read_exactly(sock, 4))
                (code,) = struct.unpack("!i", read_exactly(sock, length - 4)[:4])
                if code != SSL_REQUEST:
                    break
                if self.server.accept_ssl:
                    sock.sendall(b"S")
                    while data := sock.recv(4096):  # "encrypted": echoed as it is
                        sock.sendall(data)
                    return
                sock.sendall(b"N")
            sock.sendall(message(b"R", struct.pack("!i", 0)) + message(b"Z", b"I"))
            statement = ""
            while True:
                kind, body = read_message(sock)
                if kind == b"P":
                    name, _, rest = body.partition(b"\0")
                    statement = rest.partition(b"\0")[0].decode()
                    prepared[name.decode()] = statement
                elif kind == b"B":
                    name = body.split(b"\0")[1].decode()
                    statement = prepared.get(name, statement)
                elif kind == b"Q":
                    statement = body.rstrip(b"\0").decode()
                elif kind == b"X":
                    return
                if kind in (b"S", b"Q"):
                    self.server.received.append(statement)
                    sock.sendall(message(b"C", cstring("OK")) + message(b"Z", b"I"))
        except (ConnectionError, OSError):
            return


class Client:
    """A client speaking the frames: SSL request refused, startup, then requests."""

    def __init__(self, address: tuple[str, int], *, ssl_request: bool = True) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        if ssl_request:
            self.sock.sendall(struct.pack("!ii", 8, SSL_REQUEST))
            self.ssl_answer = read_exactly(self.sock, 1)
            if self.ssl_answer == b"S":
                return
        startup = struct.pack("!i", 196608) + cstring("user") + cstring("me") + b"\0"
        self.sock.sendall(struct.pack("!i", len(startup) + 4) + startup)
        assert read_message(self.sock)[0] == b"R"
        assert read_message(self.sock)[0] == b"Z"

    def send(self, sql: str, *, prepare_as: str | None = None, bind: str | None = None) -> None:
        """A request: Parse (named ``prepare_as``) + Bind + Execute + Sync, or, with
        ``bind``, a Bind of that prepared statement alone."""
        if bind is not None:
            parts = message(b"B", cstring("") + cstring(bind) + b"\0" * 6)
        else:
            parts = message(b"P", cstring(prepare_as or "") + cstring(sql) + b"\0\0")
            parts += message(b"B", cstring("") + cstring(prepare_as or "") + b"\0" * 6)
        parts += message(b"E", cstring("") + b"\0" * 4) + message(b"S", b"")
        self.sock.sendall(parts)

    def answer(self, timeout: float = 5.0) -> list[bytes]:
        self.sock.settimeout(timeout)
        kinds = []
        while True:
            kind, _ = read_message(self.sock)
            kinds.append(kind)
            if kind == b"Z":
                return kinds

    def request(self, sql: str, **options: str) -> list[bytes]:
        self.send(sql, **options)
        return self.answer()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    server = FakeBackend()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(backend: FakeBackend) -> Iterator[PostgresProxy]:
    with PostgresProxy(backend.address) as running:
        yield running


def address(proxy: PostgresProxy) -> tuple[str, int]:
    return proxy.host, proxy.port


@pytest.fixture
def client(proxy: PostgresProxy) -> Iterator[Client]:
    """A client connected through ``proxy``, closed after the test (passed or not)."""
    connected = Client(address(proxy))
    yield connected
    connected.close()


def test_requests_and_answers_pass_unchanged(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    assert client.ssl_answer == b"N"
    for n in range(3):
        assert client.request(f"SELECT {n}") == [b"C", b"Z"]
    assert backend.received == ["SELECT 0", "SELECT 1", "SELECT 2"]
    assert proxy.accepted == 1


def test_latency_is_added_to_each_round_trip(proxy: PostgresProxy, client: Client) -> None:
    started = time.monotonic()
    client.request("SELECT 1")
    fast = time.monotonic() - started
    proxy.latency = 0.3
    started = time.monotonic()
    client.request("SELECT 1")
    slow = time.monotonic() - started
    assert 0.3 <= slow < 0.3 + fast + 0.25
    proxy.latency = 0.0
    started = time.monotonic()
    client.request("SELECT 1")
    assert time.monotonic() - started < 0.25


def test_held_requests_wait_at_the_proxy_until_released(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    proxy.hold()
    client.send("UPDATE held")
    with pytest.raises(TimeoutError):
        client.answer(timeout=0.5)
    assert backend.received == []
    assert proxy.held_statements() == ["UPDATE held"]
    proxy.release()
    assert client.answer() == [b"C", b"Z"]
    assert backend.received == ["UPDATE held"]
    assert proxy.held_statements() == []


def test_an_applied_cut_runs_the_statement_and_resets_its_client(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    order = proxy.cut_next("UPDATE", applied=True)
    assert client.request("SELECT 1") == [b"C", b"Z"]  # not matched: untouched
    client.send("UPDATE jobs")
    with pytest.raises(ConnectionResetError):
        client.answer()
    assert order.done.wait(5)
    assert order.statements == ["UPDATE jobs"]
    assert backend.received == ["SELECT 1", "UPDATE jobs"]
    assert proxy.cuts == 1
    # Fulfilled: the next connection's statements pass.
    again = Client(address(proxy))
    assert again.request("UPDATE jobs") == [b"C", b"Z"]
    again.close()


def test_an_unapplied_cut_never_reaches_the_server(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    order = proxy.cut_next("UPDATE", applied=False)
    client.send("UPDATE jobs")
    with pytest.raises((ConnectionResetError, ConnectionError)):
        client.answer()
    assert order.done.wait(5)
    time.sleep(0.2)
    assert backend.received == []


def test_a_prepared_statement_is_recognised_when_only_bound(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    assert client.request("INSERT INTO tenantq_jobs AS j", prepare_as="_pg3_0") == [b"C", b"Z"]
    order = proxy.cut_next(lambda sql: sql.startswith("INSERT"), applied=True)
    client.send("", bind="_pg3_0")
    with pytest.raises(ConnectionResetError):
        client.answer()
    assert order.done.wait(5)
    assert order.statements == ["INSERT INTO tenantq_jobs AS j"]
    assert backend.received == ["INSERT INTO tenantq_jobs AS j"] * 2


def test_cut_all_resets_every_connection(proxy: PostgresProxy) -> None:
    clients = [Client(address(proxy)) for _ in range(3)]
    deadline = time.monotonic() + 5
    while proxy.open_connections < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.cut_all() == 3
    for client in clients:
        with pytest.raises((ConnectionResetError, ConnectionError, BrokenPipeError)):
            client.send("SELECT 1")
            client.answer()


def test_an_encrypted_connection_passes_through_as_it_is() -> None:
    backend = FakeBackend(accept_ssl=True)
    try:
        with PostgresProxy(backend.address) as proxy:
            order = proxy.cut_next("", applied=False)  # matches anything it could read
            client = Client(address(proxy))
            assert client.ssl_answer == b"S"
            noise = bytes(range(256)) * 8
            client.sock.sendall(noise)
            assert read_exactly(client.sock, len(noise)) == noise
            assert not order.done.is_set()
            client.close()
    finally:
        backend.shutdown()
        backend.server_close()


def test_url_names_the_proxy_and_keeps_the_rest() -> None:
    proxy = PostgresProxy(("127.0.0.1", 5432), port=6543)
    assert (
        proxy.url("postgresql://user:secret@db.example:5432/jobs?sslmode=disable")
        == "postgresql://user:secret@127.0.0.1:6543/jobs?sslmode=disable"
    )
    assert proxy.url("postgresql://db:5432/jobs") == "postgresql://127.0.0.1:6543/jobs"


def test_a_hold_can_begin_at_a_statement(
    proxy: PostgresProxy, backend: FakeBackend, client: Client
) -> None:
    holding = proxy.hold("UPDATE")
    assert client.request("SELECT 1") == [b"C", b"Z"]  # before the hold: passes
    assert not holding.is_set()
    client.send("UPDATE jobs")
    assert holding.wait(5)
    with pytest.raises(TimeoutError):
        client.answer(timeout=0.5)
    assert proxy.held_statements() == ["UPDATE jobs"]
    assert backend.received == ["SELECT 1"]
    proxy.release()
    assert client.answer() == [b"C", b"Z"]
    assert backend.received == ["SELECT 1", "UPDATE jobs"]
