"""The console's gate: an ASGI middleware that decides what it can about a request before any
route runs, and before the request's body is read.

| step                                                       | when it fails                |
| ---------------------------------------------------------- | ---------------------------- |
| the ``Host`` is one the console answers to                 | 400 (DNS rebinding)          |
| the path and query carry no NUL byte (PostgreSQL text      | 400                          |
| cannot hold one)                                           |                              |
| the session cookie names a live session (a look-up)        | not signed in                |
| a request that acts (not GET, HEAD, OPTIONS): origin, and  | 401, 403, 429, 400, or 503   |
| who it is (``tenantq.web.security``'s table)               | (session not checkable)      |
| ``Content-Length`` within ``web.max_body_bytes`` (16 KiB   | 413, body unread             |
| for signing in and out)                                    |                              |
| the body, as a route reads it, stays within that limit     | 413                          |

An unauthenticated request is thus answered without a byte of its body read, however large
it claims to be. What the gate found goes to ``request.state`` (``tenantq.web.console``).
Every answer that passes here, the gate's own included, gets ``SECURITY_HEADERS``; a first
visit also gets its CSRF cookie.
"""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenantq.errors import DatabaseUnavailable
from tenantq.web.caller import Caller
from tenantq.web.console import Console
from tenantq.web.errors import SECURITY_HEADERS, error_response, refusal_headers
from tenantq.web.exposure import host_name
from tenantq.web.messages import quoted
from tenantq.web.security import (
    ACTOR_HEADER,
    CSRF_COOKIE,
    SESSION_COOKIE,
    Actor,
    Guard,
    NotAllowed,
    cookie_header,
)
from tenantq.web.sessions import Session

#: Methods that only read.
READING_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Posts that anyone may make: their routes check the CSRF token (and the token).
SIGN_IN_PATHS = frozenset({"/login", "/logout"})
#: Largest body of the sign-in and sign-out forms (a name, a token, a CSRF token, a path).
SIGN_IN_BODY_BYTES = 16_384
#: Paths served without a session look-up.
STATIC_PREFIX = "/static/"


class ConsoleGate:
    """The gate in front of ``app`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, console: Console) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        caller = self.console.proxies.caller(scope)
        request = Request(scope)
        nonce_from_cookie = Guard.nonce_of(request.cookies.get(CSRF_COOKIE))
        nonce = nonce_from_cookie or Guard.new_nonce()
        scope.setdefault("state", {}).update(
            caller=caller,
            csrf_nonce=nonce,
            csrf_nonce_from_cookie=nonce_from_cookie,
            session=None,
            actor=None,
        )
        send = _finishing(send, caller, new_nonce=None if nonce_from_cookie else nonce)
        try:
            limit = await self._admit(request, caller)
        except NotAllowed as refusal:
            headers = refusal_headers(refusal)
            response = error_response(request, refusal.status, refusal.reason, headers=headers)
        except HTTPException as error:
            response = error_response(request, error.status_code, str(error.detail))
        except DatabaseUnavailable as error:
            response = error_response(request, 503, f"cannot check the session: {error}")
        else:
            await self.app(scope, _bounded(receive, limit), send)
            return
        await response(scope, receive, send)

    async def _admit(self, request: Request, caller: Caller) -> int:
        """Check what can be checked before the body; the body's byte limit."""
        console = self.console
        host = request.headers.get("host", "")
        if console.allowed_hosts is not None and host_name(host) not in console.allowed_hosts:
            raise HTTPException(
                400,
                f"this console does not answer to the host {quoted(host)} "
                "(TENANTQ_WEB__ALLOWED_HOSTS)",
            )
        path = str(request.scope.get("path", ""))
        if "\x00" in path or _has_nul(request.scope.get("query_string", b"")):
            raise HTTPException(400, "a NUL byte (%00) is not accepted in a URL")
        unavailable = await self._find_session(request)
        if request.method in READING_METHODS:
            return console.settings.web.max_body_bytes
        guard = console.guard
        guard.require_same_origin(request.headers.get("origin"), host)
        if path in SIGN_IN_PATHS:
            if path == "/login" and not guard.read_only:
                self._require_not_refused(caller)
            return _require_length(request, SIGN_IN_BODY_BYTES)
        guard.require_token_configured()
        request.state.actor = self._actor(request, caller, unavailable)
        return _require_length(request, console.settings.web.max_body_bytes)

    async def _find_session(self, request: Request) -> DatabaseUnavailable | None:
        """Put the live session of the request's cookie on its state; the database's failure,
        if the look-up failed (the request then counts as not signed in)."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie or str(request.scope.get("path", "")).startswith(STATIC_PREFIX):
            return None
        try:
            session: Session | None = await run_in_threadpool(self.console.sessions.find, cookie)
        except DatabaseUnavailable as error:
            return error
        request.state.session = session
        return None

    def _actor(
        self, request: Request, caller: Caller, unavailable: DatabaseUnavailable | None
    ) -> Actor:
        authorization = request.headers.get("authorization")
        if authorization:
            self._require_not_refused(caller)
            try:
                return self.console.guard.bearer_actor(
                    authorization, request.headers.get(ACTOR_HEADER)
                )
            except NotAllowed as refusal:
                if refusal.status == 401:
                    self.console.failed_logins.failed(caller.address, "bearer")
                raise
        session: Session | None = request.state.session
        if session is not None:
            return Actor(session.user, "session", session.id)
        if unavailable is not None:
            raise unavailable
        raise NotAllowed(401, "sign in with the console token to act")

    def _require_not_refused(self, caller: Caller) -> None:
        refusal = self.console.failed_logins.refusal(caller.address)
        if refusal is not None:
            raise NotAllowed(
                429,
                f"too many wrong tokens: try again in {refusal.retry_after}s",
                retry_after=refusal.retry_after,
            )


def _has_nul(query: bytes) -> bool:
    return b"\x00" in query or b"%00" in query


def _require_length(request: Request, limit: int) -> int:
    """``limit``, once ``Content-Length`` (when given) is within it."""
    declared = request.headers.get("content-length")
    if declared is None:
        return limit
    declared = declared.strip()
    if not declared.isdigit():
        raise HTTPException(400, "Content-Length is not a number of bytes")
    if len(declared) > 15 or int(declared) > limit:
        raise HTTPException(413, f"the body is larger than {limit} bytes")
    return limit


def _bounded(receive: Receive, limit: int) -> Receive:
    """``receive`` that refuses (413) a body growing past ``limit`` as it streams in."""
    received = 0

    async def bounded() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise HTTPException(413, f"the body is larger than {limit} bytes")
        return message

    return bounded


def _finishing(send: Send, caller: Caller, *, new_nonce: str | None) -> Send:
    """``send`` that adds the security headers (where a route set none of its own) and, on a
    first visit, the CSRF cookie."""

    async def finishing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                if name not in headers:
                    headers[name] = value
            if new_nonce is not None:
                headers.append(
                    "set-cookie", cookie_header(CSRF_COOKIE, new_nonce, secure=caller.https)
                )
        await send(message)

    return finishing
