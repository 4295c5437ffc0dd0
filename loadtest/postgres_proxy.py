"""A TCP proxy between tenantq's workers and PostgreSQL that injects what a network does to
them: latency on every round trip, statements held on their way to the server, and
connections cut while a statement is in flight.

    with PostgresProxy(("127.0.0.1", 5432)) as proxy:
        url = proxy.url(database_url)        # give this URL to the workers
        proxy.latency = 0.5                  # every round trip 500 ms longer
        proxy.hold()                         # what the clients send waits here ...
        proxy.held_statements()              # ... (the SQL of each request held)
        proxy.release()                      # ... and goes on, in order
        order = proxy.cut_next("INSERT INTO tenantq_jobs", applied=True)
        order.done.wait(10)                  # the next claim ran, its client saw a reset

The proxy runs an asyncio loop in a thread of its own, so a synchronous fault script drives
it with plain calls. It reads the PostgreSQL wire protocol (version 3) only to know where a
request ends (``Sync`` or a simple ``Query``) and which statement it runs (the text of its
``Parse``, or of the prepared statement a ``Bind`` names), and where its answer ends
(``ReadyForQuery``); the bytes go on unchanged. A connection that turns to TLS or GSS
encryption is passed through as it is: latency and holds apply to it, statement cuts cannot.

A cut resets the client's connection (RST, as a dropped network path or a proxy's idle
timeout does): ``applied=True`` lets the statement reach the server, waits for its whole
answer and withholds it (the statement ran, the client cannot know); ``applied=False`` drops
the statement and resets the server's side too (it never ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

#: Codes of the untyped first messages a client may send (before or instead of a startup).
SSL_REQUEST = 80877103
GSS_ENCRYPTION_REQUEST = 80877104
CANCEL_REQUEST = 80877102
#: Reads from a socket at most this much at a time.
CHUNK = 65_536


@dataclass
class CutOrder:
    """Cut the connections of the next ``count`` requests whose SQL ``matches``; ``done`` is
    set once they are cut, ``statements`` holds their SQL."""

    matches: Callable[[str], bool]
    applied: bool
    count: int = 1
    done: threading.Event = field(default_factory=threading.Event)
    #: The SQL of each request picked so far.
    statements: list[str] = field(default_factory=list)
    #: Requests picked and cut, and when the last was cut (epoch seconds).
    cut: int = 0
    cut_at: float | None = None

    @property
    def remaining(self) -> int:
        return self.count - len(self.statements)


class _Frames:
    """Splits a byte stream into protocol messages: ``(type, whole message bytes)``; the type
    is ``None`` for an untyped startup-phase message (length, then a code)."""

    def __init__(self, *, untyped_first: bool) -> None:
        self._buffer = bytearray()
        #: Untyped messages still expected before the typed ones start.
        self.untyped = untyped_first
        #: Single-byte answers (to SSL / GSS requests) expected next (the server's side).
        self.single_bytes = 0

    def feed(self, data: bytes) -> list[tuple[bytes | None, bytes]]:
        self._buffer += data
        messages: list[tuple[bytes | None, bytes]] = []
        while True:
            if self.single_bytes and self._buffer:
                messages.append((b"!", bytes(self._buffer[:1])))
                del self._buffer[:1]
                self.single_bytes -= 1
                continue
            if self.untyped:
                if len(self._buffer) < 4:
                    return messages
                (length,) = struct.unpack_from("!i", self._buffer)
                if len(self._buffer) < length:
                    return messages
                messages.append((None, bytes(self._buffer[:length])))
                del self._buffer[:length]
                # Stays untyped only for an SSL or GSS request; ``_Link`` decides.
                self.untyped = False
                continue
            if len(self._buffer) < 5:
                return messages
            (length,) = struct.unpack_from("!i", self._buffer, 1)
            if len(self._buffer) < length + 1:
                return messages
            messages.append((bytes(self._buffer[:1]), bytes(self._buffer[: length + 1])))
            del self._buffer[: length + 1]

    def rest(self) -> bytes:
        """Bytes not yet framed (passed through raw once the stream turns opaque)."""
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


async def _sleep_until(due: float) -> None:
    """Sleep until ``due`` on the running loop's clock (at once when it has passed)."""
    wait = due - asyncio.get_running_loop().time()
    if wait > 0:
        await asyncio.sleep(wait)


def _cstring(data: bytes, start: int) -> tuple[str, int]:
    end = data.index(b"\0", start)
    return data[start:end].decode(errors="replace"), end + 1


#: What a pump queues for its writer: client-bound or server-bound items.
_Item = TypeVar("_Item")


@dataclass
class _Request:
    """One request forwarded (or to be): its SQL, and the cut order that picked it."""

    sql: str
    cut: CutOrder | None = None


class _Link:
    """One client connection and its connection to the server."""

    def __init__(
        self,
        proxy: PostgresProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.server_reader, self.server_writer = server
        self.upstream: asyncio.Queue[tuple[float, bytes, _Request | None] | None] = asyncio.Queue()
        #: (due, bytes, reset the client after them) on their way to the client.
        self.downstream: asyncio.Queue[tuple[float, bytes, bool] | None] = asyncio.Queue()
        self.client_frames = _Frames(untyped_first=True)
        self.server_frames = _Frames(untyped_first=False)
        #: Once encrypted (TLS, GSS) the bytes are opaque: passed through, not parsed.
        self.opaque = False
        #: Prepared statement name -> its SQL (from the client's ``Parse`` messages).
        self.prepared: dict[str, str] = {}
        #: SQL of the request being read (messages since the last ``Sync``).
        self.reading: list[str] = []
        #: Requests queued for the server and not written yet (what a hold holds).
        self.queued: deque[str] = deque()
        #: Requests written to the server, and answers (``ReadyForQuery``) read back; the
        #: first ``ReadyForQuery`` ends the start-up, not a request.
        self.forwarded = 0
        self.answered = -1
        #: The request number whose answer is withheld (then the client is reset).
        self.withhold_from: int | None = None
        self.withheld_order: CutOrder | None = None
        self.closed = False

    # -- client to server --

    async def pump_upstream(self) -> None:
        await self._pump(self.client_reader, self.upstream, self._take_client)

    def _take_client(self, data: bytes, due: float) -> bool:
        for chunk, request in self._frame_client(data):
            if request is not None:
                self.queued.append(request.sql)
            self.upstream.put_nowait((due, chunk, request))
        return False

    def _frame_client(self, data: bytes) -> list[tuple[bytes, _Request | None]]:
        """What to send for ``data``: byte runs, each closed by the request it ends (if any)."""
        if self.opaque:
            return [(data, None)]
        out: list[tuple[bytes, _Request | None]] = []
        pending = bytearray()
        for kind, message in self.client_frames.feed(data):
            pending += message
            if kind is None:
                (code,) = struct.unpack_from("!i", message, 4)
                if code in (SSL_REQUEST, GSS_ENCRYPTION_REQUEST):
                    self.client_frames.untyped = True
                    self.server_frames.single_bytes += 1
                continue
            if kind == b"P":
                name, at = _cstring(message, 5)
                sql, _ = _cstring(message, at)
                if name:
                    self.prepared[name] = sql
                self.reading.append(sql)
            elif kind == b"B":
                _, at = _cstring(message, 5)
                name, _ = _cstring(message, at)
                if name in self.prepared:
                    self.reading.append(self.prepared[name])
            elif kind == b"Q":
                self.reading.append(_cstring(message, 5)[0])
            if kind in (b"S", b"Q"):
                sql = "\n".join(dict.fromkeys(self.reading))
                self.reading = []
                out.append((bytes(pending), _Request(sql, self.proxy._on_request(sql))))
                pending.clear()
        if pending:
            out.append((bytes(pending), None))
        return out

    async def write_upstream(self) -> None:
        await self._write(self.upstream, self.server_writer, self._forward_to_server)

    async def _forward_to_server(self, item: tuple[float, bytes, _Request | None]) -> bool:
        due, chunk, request = item
        await self.proxy._released.wait()
        if self.closed:
            return False
        await _sleep_until(due)
        if request is not None:
            self.queued.popleft()
            if request.cut is not None and not request.cut.applied:
                self.proxy._cut_done(request.cut)
                self.reset(server_too=True)
                return False
            self.forwarded += 1
            if request.cut is not None:
                self.withhold_from = self.forwarded
                self.withheld_order = request.cut
        self.server_writer.write(chunk)
        await self.server_writer.drain()
        return True

    # -- server to client --

    async def pump_downstream(self) -> None:
        await self._pump(self.server_reader, self.downstream, self._take_server)

    def _take_server(self, data: bytes, due: float) -> bool:
        passed, withheld = self._frame_server(data)
        if passed or withheld:
            self.downstream.put_nowait((due, passed, withheld))
        # Nothing after a withheld answer reaches the client: it is reset instead.
        return withheld

    def _frame_server(self, data: bytes) -> tuple[bytes, bool]:
        """The bytes of ``data`` the client gets, and whether a withheld answer is complete
        (the client is then reset after those bytes)."""
        if self.opaque:
            return data, False
        passed = bytearray()
        for kind, message in self.server_frames.feed(data):
            if kind == b"!":
                if message in (b"S", b"G"):  # encryption accepted: opaque from here on
                    self.opaque = True
                    passed += message + self.server_frames.rest()
                    return bytes(passed), False
                passed += message
                continue
            answering = self.answered + 1
            if kind == b"Z":
                self.answered += 1
            if self.withhold_from is not None and answering >= self.withhold_from:
                if kind == b"Z" and answering == self.withhold_from:
                    return bytes(passed), True
                continue
            passed += message
        return bytes(passed), False

    async def write_downstream(self) -> None:
        await self._write(self.downstream, self.client_writer, self._forward_to_client)

    async def _forward_to_client(self, item: tuple[float, bytes, bool]) -> bool:
        due, chunk, withheld = item
        await _sleep_until(due)
        if self.closed:
            return False
        if chunk:
            self.client_writer.write(chunk)
            await self.client_writer.drain()
        if withheld:
            # The statement ran; its client gets a reset instead of the answer.
            assert self.withheld_order is not None
            self.proxy._cut_done(self.withheld_order)
            self.reset(server_too=False)
            return False
        return True

    # -- both directions --

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        queue: asyncio.Queue[_Item | None],
        take: Callable[[bytes, float], bool],
    ) -> None:
        """Read one side until it ends or ``take`` (given each read and when it is due on the
        other side) answers stop; then a ``None`` on ``queue`` tells its writer no more comes."""
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(CHUNK):
                if take(data, loop.time() + self.proxy.latency / 2):
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            queue.put_nowait(None)

    async def _write(
        self,
        queue: asyncio.Queue[_Item | None],
        writer: asyncio.StreamWriter,
        forward: Callable[[_Item], Awaitable[bool]],
    ) -> None:
        """Hand ``queue``'s items to ``forward`` until it answers stop, or until the pump's
        ``None``: then the stream to ``writer`` ends as the other side's did (unless the link
        was reset meanwhile). A failed write resets both sides."""
        try:
            while (item := await queue.get()) is not None:
                if not await forward(item):
                    return
            if not self.closed:
                with contextlib.suppress(OSError):
                    writer.write_eof()
        except (ConnectionError, OSError):
            self.reset(server_too=True)

    # -- ends --

    def reset(self, *, server_too: bool) -> None:
        """RST to the client; the server's side is reset too, or closed in order."""
        if self.closed:
            return
        self.closed = True
        _abort(self.client_writer)
        if server_too:
            _abort(self.server_writer)
        else:
            self.server_writer.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client_writer.close()
            self.server_writer.close()


def _matcher(matches: str | Callable[[str], bool]) -> Callable[[str], bool]:
    if isinstance(matches, str):
        return lambda sql: matches in sql
    return matches


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (RST), not an orderly FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class PostgresProxy:
    """Listens on ``host:port`` (0: a free port) and relays each connection to ``upstream``.

    The controls may be called from any thread: ``latency`` (seconds added to each round
    trip, half on the way there and half on the way back), ``hold`` / ``release``, and
    ``cut_next`` / ``cut_all``."""

    def __init__(self, upstream: tuple[str, int], *, host: str = "127.0.0.1", port: int = 0):
        self.upstream = upstream
        self.host = host
        self.port = port
        #: Seconds added to every round trip (read by the loop at each chunk).
        self.latency = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="postgres-proxy")
        self._thread.daemon = True
        self._server: asyncio.Server | None = None
        self._released = asyncio.Event()
        self._released.set()
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._orders: list[CutOrder] = []
        #: A hold to begin at the next request that matches (and its "on" event).
        self._hold_from: tuple[Callable[[str], bool], threading.Event] | None = None
        #: Connections accepted, and connections cut, since the start.
        self.accepted = 0
        self.cuts = 0

    # -- life cycle --

    def start(self) -> PostgresProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown(), timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> PostgresProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def url(self, database_url: str) -> str:
        """``database_url`` with this proxy's host and port in place of the server's."""
        parts = urlsplit(database_url)
        credentials, _, _ = parts.netloc.rpartition("@")
        netloc = f"{credentials}@" if credentials else ""
        return urlunsplit(parts._replace(netloc=f"{netloc}{self.host}:{self.port}"))

    # -- controls --

    def hold(self, matches: str | Callable[[str], bool] | None = None) -> threading.Event:
        """From now on (or, given ``matches``, from the next request whose SQL contains it or
        for which it returns True, that request included), what clients send waits at the
        proxy; answers still flow back. Returns an event set once the hold is on."""
        holding = threading.Event()
        if matches is None:
            self._loop.call_soon_threadsafe(self._released.clear)
            self._loop.call_soon_threadsafe(holding.set)
        else:
            with self._lock:
                self._hold_from = (_matcher(matches), holding)
        return holding

    def release(self) -> None:
        """Send on everything held, in order (and forget a hold not begun yet)."""
        with self._lock:
            self._hold_from = None
        self._loop.call_soon_threadsafe(self._released.set)

    def held_statements(self) -> list[str]:
        """The SQL of every request waiting at the proxy (held, or in its latency), not yet
        sent to the server."""
        return self._call(self._queued())

    def cut_next(self, matches: str | Callable[[str], bool], *, applied: bool, count: int = 1):
        """Cut the connection of each of the next ``count`` requests whose SQL contains
        ``matches`` (or for which it returns True); see the module's docstring for
        ``applied``. Returns the order: ``done`` is set when all were cut."""
        order = CutOrder(_matcher(matches), applied, count)
        with self._lock:
            self._orders.append(order)
        return order

    def cancel_cuts(self) -> None:
        """Forget the cut orders not fulfilled yet."""
        with self._lock:
            self._orders.clear()

    def cut_all(self) -> int:
        """Reset every open connection now (both sides); returns how many."""
        return self._call(self._cut_all())

    @property
    def open_connections(self) -> int:
        return len(self._links)

    # -- inside the loop --

    def _call(self, coroutine, timeout: float = 30.0):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset(server_too=True)
        self._released.set()
        # The links' tasks end on their own once their sockets are gone.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if others:
            _, pending = await asyncio.wait(others, timeout=5)
            for task in pending:
                task.cancel()

    async def _queued(self) -> list[str]:
        return [sql for link in self._links for sql in link.queued]

    async def _cut_all(self) -> int:
        links = [link for link in self._links if not link.closed]
        for link in links:
            link.reset(server_too=True)
        self.cuts += len(links)
        return len(links)

    def _on_request(self, sql: str) -> CutOrder | None:
        """A client's request is complete: begin a hold it matches; the cut order that picks
        it, if any."""
        with self._lock:
            if self._hold_from is not None and self._hold_from[0](sql):
                _, holding = self._hold_from
                self._hold_from = None
                self._released.clear()
                holding.set()
            for order in self._orders:
                if order.remaining > 0 and order.matches(sql):
                    order.statements.append(sql)
                    if order.remaining == 0:
                        self._orders.remove(order)
                    return order
        return None

    def _cut_done(self, order: CutOrder) -> None:
        self.cuts += 1
        order.cut += 1
        order.cut_at = time.time()
        if order.cut >= order.count:
            order.done.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            server = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort(writer)
            return
        link = _Link(self, (reader, writer), server)
        self._links.add(link)
        try:
            await asyncio.gather(
                link.pump_upstream(),
                link.write_upstream(),
                link.pump_downstream(),
                link.write_downstream(),
                return_exceptions=True,
            )
        finally:
            self._links.discard(link)
            link.close()
