"""Console sign-ins (``tenantq web``): named statements, one function each.

A session is a row keyed by the SHA-256 of the random id its cookie carries, in one deployment
(topic prefix); it acts while the row is there and ``expires_at`` (the database clock) is ahead.
Signing out deletes the row, so a saved copy of the cookie stops acting at once, in every
console process.
"""

from __future__ import annotations

from tenantq.store.engine import DeploymentConnection

#: A new sign-in of ``user_name`` for ``seconds``.
WEB_SESSION_INSERT = """
INSERT INTO tenantq_web_sessions (id_sha256, deployment, user_name, expires_at)
VALUES (%(id_sha256)s, %(deployment)s, %(user_name)s,
        now() + make_interval(secs => %(seconds)s))
"""

#: The user of a live sign-in (none when unknown, of another prefix, or expired).
WEB_SESSION_USER = """
SELECT user_name
FROM tenantq_web_sessions
WHERE id_sha256 = %(id_sha256)s AND deployment = %(deployment)s AND expires_at > now()
"""

#: Signing out: the row goes, and with it every copy of the cookie.
WEB_SESSION_DELETE = """
DELETE FROM tenantq_web_sessions
WHERE id_sha256 = %(id_sha256)s AND deployment = %(deployment)s
"""

#: Expired sign-ins of one prefix, a bounded batch per call (at each new sign-in).
WEB_SESSION_DELETE_EXPIRED = """
DELETE FROM tenantq_web_sessions
WHERE id_sha256 IN (
    SELECT id_sha256 FROM tenantq_web_sessions
    WHERE deployment = %(deployment)s AND expires_at <= now()
    LIMIT %(limit)s
)
"""


def web_session_insert(
    connection: DeploymentConnection,
    *,
    id_sha256: bytes,
    user_name: str,
    seconds: float,
) -> None:
    """Record a sign-in that lasts ``seconds`` from now (the database clock)."""
    parameters = {
        "id_sha256": id_sha256,
        "deployment": connection.deployment,
        "user_name": user_name,
        "seconds": seconds,
    }
    with connection.cursor() as cursor:
        cursor.execute(WEB_SESSION_INSERT, parameters)


def web_session_user(connection: DeploymentConnection, *, id_sha256: bytes) -> str | None:
    """The user of the live sign-in ``id_sha256``, or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            WEB_SESSION_USER, {"id_sha256": id_sha256, "deployment": connection.deployment}
        )
        row = cursor.fetchone()
    return None if row is None else str(row[0])


def web_session_delete(connection: DeploymentConnection, *, id_sha256: bytes) -> bool:
    """End the sign-in ``id_sha256``; whether there was one."""
    with connection.cursor() as cursor:
        cursor.execute(
            WEB_SESSION_DELETE, {"id_sha256": id_sha256, "deployment": connection.deployment}
        )
        return cursor.rowcount > 0


def web_session_delete_expired(connection: DeploymentConnection, *, limit: int = 1_000) -> int:
    """Delete up to ``limit`` expired sign-ins of the connection's deployment; how many went."""
    with connection.cursor() as cursor:
        cursor.execute(
            WEB_SESSION_DELETE_EXPIRED, {"deployment": connection.deployment, "limit": limit}
        )
        return cursor.rowcount
