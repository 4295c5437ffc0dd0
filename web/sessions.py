"""Console sign-ins, kept in PostgreSQL so that signing out ends them.

Why a row and not a signed cookie alone: a signed cookie carries its own validity, so signing
out could only delete the browser's copy, and a saved copy kept acting until it expired. Why
PostgreSQL and not the console's memory: several console processes (behind one name, or one
per on-call host) then agree on who is signed in, signing out in one ends the session in all,
and a restart or a deploy of the console signs nobody out. The price is one look-up by primary
key per request that carries a cookie, and no acting through the console while the database
is down, when there is little to act on anyway (a page then says so, 503).

The cookie carries a random 256-bit id and its signature (``Guard.session_cookie``); the row is
keyed by the id's SHA-256, so the table never holds a usable cookie. A session lasts
``web.session_hours`` on the database clock; a new token invalidates every cookie (their
signatures no longer match). Rows belong to the console's topic prefix.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from tenantq.store import web_sessions
from tenantq.web.database import Database
from tenantq.web.security import USER_NAME, USER_NAME_RULE, Guard


@dataclass(frozen=True)
class Session:
    """A live sign-in: its id (known to the cookie only) and its user."""

    id: str
    user: str


class Sessions:
    """Opens, finds and ends the console's sign-ins."""

    def __init__(self, database: Database, guard: Guard, *, seconds: float) -> None:
        self._database = database
        self._guard = guard
        self.seconds = seconds

    def open(self, user: str) -> tuple[Session, str]:
        """A new session of ``user`` and the cookie value that carries it; expired sessions of
        this prefix are deleted on the way (``DatabaseUnavailable`` when the database is down)."""
        if not USER_NAME.match(user):
            raise ValueError(f"a user name is {USER_NAME_RULE}")
        session = Session(secrets.token_urlsafe(32), user)
        with self._database.connection() as connection:
            web_sessions.web_session_delete_expired(connection)
            web_sessions.web_session_insert(
                connection,
                id_sha256=_digest(session.id),
                user_name=user,
                seconds=self.seconds,
            )
        return session, self._guard.session_cookie(session.id)

    def find(self, cookie: str | None) -> Session | None:
        """The live session a cookie carries, or None (forged, expired or signed out)."""
        session_id = self._guard.session_id_of(cookie)
        if session_id is None:
            return None
        with self._database.connection() as connection:
            user = web_sessions.web_session_user(connection, id_sha256=_digest(session_id))
        return None if user is None else Session(session_id, user)

    def end(self, session: Session) -> bool:
        """Sign out: every copy of the session's cookie stops acting. Whether it was live."""
        with self._database.connection() as connection:
            return web_sessions.web_session_delete(connection, id_sha256=_digest(session.id))


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()
