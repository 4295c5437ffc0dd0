"""Who may act through the console, and proof that a form post came from the console.

Decided for every request that is not a GET or HEAD, before its body is read
(``tenantq.web.gate``), in this order:

| request                                    | outcome                                         |
| ------------------------------------------ | ----------------------------------------------- |
| ``Origin`` names a host other than ours    | 403                                             |
| ``POST /login``, ``POST /logout``           | let through; the route checks the CSRF token   |
|                                            | (and, for sign-in, the limiter and the token)   |
| any other, no ``TENANTQ_WEB__TOKEN`` set   | 401: the console is read-only                   |
| ``Authorization: Bearer``, limiter refuses | 429 with Retry-After; the token is not compared |
| ``Authorization: Bearer <wrong>``           | 401, counted by the failed-login limiter        |
| bearer right, ``X-Tenantq-Actor`` invalid  | 400 (never recorded as someone else)            |
| bearer right                               | acts as ``web:<X-Tenantq-Actor or api>``; no    |
|                                            | CSRF check: a browser never adds that header    |
| cookie of a live session                   | acts as its user once the route has checked the |
|                                            | CSRF token bound to that session (403 if not)   |
| anything else                              | 401                                             |

Signatures are HMAC-SHA256 under a key derived from the token, so a new token invalidates
every session cookie and form at once, while a restart of the console does not. The session
itself is a row in PostgreSQL (``tenantq.web.sessions``); the signature only spares the
database a look-up for a forged cookie. A form's CSRF token is the signature of the session
it belongs to, or, before sign-in, of a random nonce kept in a ``SameSite=Strict`` cookie
(the signed double-submit cookie): another site can neither read nor forge either.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from pydantic import SecretStr

SESSION_COOKIE = "tenantq_session"
CSRF_COOKIE = "tenantq_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
ACTOR_HEADER = "x-tenantq-actor"
#: Console user names, as they appear in audit rows (``web:<name>``).
USER_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
USER_NAME_RULE = "1-64 letters, digits or . _ @ -"
#: A cookie value longer than this is not one this console made.
LONGEST_COOKIE = 256
_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_.-]{1,256}$")


class NotAllowed(Exception):
    """An action refused; ``status`` is 400, 401 (who are you?), 403 (not from here) or 429
    (too many wrong tokens: ``retry_after`` seconds)."""

    def __init__(self, status: int, reason: str, *, retry_after: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class Actor:
    """Who performs an action: a signed-in console user or a script holding the token."""

    name: str
    #: "session" (login form) or "token" (Authorization header).
    via: str
    #: The session's id when ``via`` is "session": what its CSRF tokens are bound to.
    session_id: str | None = None

    @property
    def audit_name(self) -> str:
        """The actor as audit rows name it: ``web:<name>``."""
        return f"web:{self.name}"


class Guard:
    """Compares tokens, signs and checks session cookies and CSRF tokens, and decides on
    bearer requests and origins (the table in the module docstring)."""

    def __init__(self, token: SecretStr | None) -> None:
        secret = token.get_secret_value() if token is not None else ""
        self._token = secret or None
        self._key = (
            hmac.new(secret.encode(), b"tenantq console signatures", hashlib.sha256).digest()
            if self._token is not None
            else secrets.token_bytes(32)
        )

    @property
    def read_only(self) -> bool:
        """True when no token is configured: every action is refused."""
        return self._token is None

    def token_matches(self, candidate: str | None) -> bool:
        """Constant-time comparison with the configured token."""
        if self._token is None or not candidate:
            return False
        return hmac.compare_digest(candidate.encode(), self._token.encode())

    # -- session cookies ---------------------------------------------------------------------

    def session_cookie(self, session_id: str) -> str:
        """The cookie value that carries ``session_id``: the id and its signature."""
        return f"{session_id}.{self._sign('session', session_id)}"

    def session_id_of(self, cookie: str | None) -> str | None:
        """The session id of a cookie this console signed, else None (no database needed)."""
        if not cookie or self.read_only or not _COOKIE_VALUE.match(cookie):
            return None
        session_id, _, signature = cookie.rpartition(".")
        if not session_id or not hmac.compare_digest(signature, self._sign("session", session_id)):
            return None
        return session_id

    # -- CSRF --------------------------------------------------------------------------------

    @staticmethod
    def new_nonce() -> str:
        """A fresh random value for the CSRF cookie."""
        return secrets.token_urlsafe(24)

    @staticmethod
    def nonce_of(cookie: str | None) -> str | None:
        """The CSRF cookie's nonce when it looks like one this console made."""
        return cookie if cookie and _COOKIE_VALUE.match(cookie) else None

    def csrf_token(self, binding: str) -> str:
        """What forms carry for ``binding`` (``session:<id>`` or ``nonce:<nonce>``)."""
        return self._sign("csrf", binding)

    def csrf_valid(self, binding: str | None, token: str | None) -> bool:
        """Whether ``token`` was made by this console for ``binding``."""
        if not binding or not token:
            return False
        return hmac.compare_digest(token.encode(), self._sign("csrf", binding).encode())

    def require_csrf(self, binding: str | None, token: str | None) -> None:
        """``NotAllowed`` (403) unless ``csrf_valid``."""
        if not self.csrf_valid(binding, token):
            raise NotAllowed(403, "the form is stale or not from this console (CSRF check)")

    # -- decisions ---------------------------------------------------------------------------

    def require_token_configured(self) -> None:
        """``NotAllowed`` (401) on a read-only console."""
        if self.read_only:
            raise NotAllowed(401, "the console is read-only: no TENANTQ_WEB__TOKEN is configured")

    @staticmethod
    def require_same_origin(origin: str | None, host: str | None) -> None:
        """``NotAllowed`` (403) when ``Origin`` names another host than ``Host``."""
        if origin and host and origin != "null" and _host_of(origin) != host.lower():
            raise NotAllowed(403, "cross-origin request refused")

    def bearer_actor(self, authorization: str, actor_header: str | None) -> Actor:
        """The actor of a request with an ``Authorization`` header, or ``NotAllowed``: 401
        for a wrong token, 400 for an ``X-Tenantq-Actor`` that is not a user name."""
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not self.token_matches(value.strip()):
            raise NotAllowed(401, "the bearer token does not match")
        if actor_header is None:
            return Actor("api", "token")
        if not USER_NAME.match(actor_header):
            raise NotAllowed(400, f"X-Tenantq-Actor must be {USER_NAME_RULE} (it names audit rows)")
        return Actor(actor_header, "token")

    def _sign(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()
        return _b64(digest)


def session_binding(session_id: str) -> str:
    """What the CSRF tokens of a session are bound to."""
    return f"session:{session_id}"


def nonce_binding(nonce: str | None) -> str | None:
    """What the CSRF tokens of a visitor not signed in are bound to (their cookie's nonce)."""
    return f"nonce:{nonce}" if nonce else None


def cookie_header(
    name: str, value: str, *, secure: bool, max_age: int | None = None, delete: bool = False
) -> str:
    """A ``Set-Cookie`` value: ``HttpOnly``, ``SameSite=Strict``, path ``/``, and ``Secure``
    when the console is reached over https (directly or through a trusted proxy)."""
    parts = [f"{name}={'' if delete else value}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if delete:
        parts.append("Max-Age=0")
    elif max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _host_of(origin: str) -> str:
    """``http://127.0.0.1:8765`` -> ``127.0.0.1:8765``."""
    return origin.split("://", 1)[-1].rstrip("/").lower()
