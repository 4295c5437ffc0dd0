"""Who may act through the console, and proof that a form post came from the console.

| request                                   | outcome                                          |
| ----------------------------------------- | ------------------------------------------------ |
| any GET                                   | served (reading needs no token)                  |
| POST, no ``TENANTQ_WEB__TOKEN`` set       | 401: the console is read-only                    |
| POST with ``Authorization: Bearer <tok>`` | allowed when the token matches (scripts; no CSRF |
|                                           | check: a browser never adds that header itself)  |
| POST with a session cookie                | allowed when the CSRF token (form field ``csrf``  |
|                                           | or header ``X-CSRF-Token``) matches the cookie   |
| POST from another origin                  | 403 (``Origin`` names a host other than ours)    |
| anything else                             | 401                                              |

Sessions and CSRF tokens are HMAC-SHA256 signatures under a key drawn at start-up and mixed
with the token: restarting the console or changing the token signs everyone out. The CSRF
scheme is the signed double-submit cookie: a random nonce in a ``SameSite=Strict`` cookie, and
forms carry its signature, which another site can neither read nor forge.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from pydantic import SecretStr

SESSION_COOKIE = "tenantq_session"
CSRF_COOKIE = "tenantq_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: Console user names, as they appear in audit rows (``web:<name>``).
USER_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


class NotAllowed(Exception):
    """An action refused; ``status`` is 401 (who are you?) or 403 (not from here)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Actor:
    """Who performs an action: a signed-in console user or a script holding the token."""

    name: str
    #: "session" (login form) or "token" (Authorization header).
    via: str

    @property
    def audit_name(self) -> str:
        """The actor as audit rows name it: ``web:<name>``."""
        return f"web:{self.name}"


class Guard:
    """Checks tokens, signs and reads session cookies, makes and checks CSRF tokens."""

    def __init__(self, token: SecretStr | None, *, session_seconds: float) -> None:
        self._token = token.get_secret_value() if token is not None else None
        if self._token == "":
            self._token = None
        self.session_seconds = session_seconds
        self._key = hashlib.sha256(secrets.token_bytes(32) + (self._token or "").encode()).digest()

    @property
    def read_only(self) -> bool:
        """True when no token is configured: every action is refused."""
        return self._token is None

    def token_matches(self, candidate: str | None) -> bool:
        """Constant-time comparison with the configured token."""
        if self._token is None or not candidate:
            return False
        return hmac.compare_digest(candidate.encode(), self._token.encode())

    # -- sessions ----------------------------------------------------------------------------

    def issue_session(self, user: str, *, now: float | None = None) -> str:
        """A cookie value naming ``user`` until the session expires."""
        if not USER_NAME.match(user):
            raise ValueError("a user name is 1-64 letters, digits or . _ @ -")
        expires = int((now if now is not None else time.time()) + self.session_seconds)
        body = f"{_b64(user.encode())}.{expires}"
        return f"{body}.{self._sign('session', body)}"

    def session_user(self, cookie: str | None, *, now: float | None = None) -> str | None:
        """The user of a valid, unexpired session cookie, else None."""
        if not cookie or self.read_only:
            return None
        parts = cookie.split(".")
        if len(parts) != 3:
            return None
        user_part, expires_part, signature = parts
        body = f"{user_part}.{expires_part}"
        if not hmac.compare_digest(signature, self._sign("session", body)):
            return None
        try:
            expires = int(expires_part)
            user = _unb64(user_part).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        if expires < (now if now is not None else time.time()):
            return None
        return user if USER_NAME.match(user) else None

    # -- CSRF --------------------------------------------------------------------------------

    @staticmethod
    def new_nonce() -> str:
        """A fresh random value for the CSRF cookie."""
        return secrets.token_urlsafe(24)

    def csrf_token(self, nonce: str) -> str:
        """What forms carry for the cookie's ``nonce``."""
        return self._sign("csrf", nonce)

    def csrf_valid(self, nonce: str | None, token: str | None) -> bool:
        """Whether ``token`` was made by this console for ``nonce``."""
        if not nonce or not token:
            return False
        return hmac.compare_digest(token, self._sign("csrf", nonce))

    def require_csrf(self, nonce: str | None, token: str | None) -> None:
        """``NotAllowed`` (403) unless ``csrf_valid``."""
        if not self.csrf_valid(nonce, token):
            raise NotAllowed(403, "the form is stale or not from this console (CSRF check)")

    # -- the decision ------------------------------------------------------------------------

    def authorize(
        self,
        *,
        authorization: str | None,
        session_cookie: str | None,
        csrf_nonce: str | None,
        csrf_token: str | None,
        origin: str | None,
        host: str | None,
        actor_hint: str | None = None,
    ) -> Actor:
        """The actor of a POST, or ``NotAllowed`` (see the table in the module docstring)."""
        if self.read_only:
            raise NotAllowed(401, "the console is read-only: no TENANTQ_WEB__TOKEN is configured")
        if origin and host and origin not in ("null",) and _host_of(origin) != host.lower():
            raise NotAllowed(403, "cross-origin request refused")
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not self.token_matches(value.strip()):
                raise NotAllowed(401, "the bearer token does not match")
            name = actor_hint if actor_hint and USER_NAME.match(actor_hint) else "api"
            return Actor(name, "token")
        user = self.session_user(session_cookie)
        if user is None:
            raise NotAllowed(401, "sign in with the console token to act")
        self.require_csrf(csrf_nonce, csrf_token)
        return Actor(user, "session")

    def _sign(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()
        return _b64(digest)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _host_of(origin: str) -> str:
    """``http://127.0.0.1:8765`` -> ``127.0.0.1:8765``."""
    return origin.split("://", 1)[-1].rstrip("/").lower()
