"""What every route of the console shares: its collaborators (``Console``), rendering a page
with the common context, and the check that guards every action (``acting``).

What the gate (``tenantq.web.gate``) found out about a request before any route ran is on
``request.state``: ``caller`` (address, https), ``csrf_nonce`` and ``csrf_nonce_from_cookie``,
``session`` (the live sign-in, or None) and, for an action, ``actor``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from tenantq.observability.consumer_lag import BacklogProbe
from tenantq.settings import Settings
from tenantq.web.caller import Proxies
from tenantq.web.database import Database
from tenantq.web.exposure import allowed_hosts
from tenantq.web.login_limiter import FailedLogins
from tenantq.web.messages import quoted
from tenantq.web.metrics import ConsoleMetrics
from tenantq.web.security import (
    CSRF_FIELD,
    CSRF_HEADER,
    Actor,
    Guard,
    NotAllowed,
    nonce_binding,
    session_binding,
)
from tenantq.web.sessions import Session, Sessions
from tenantq.web.state import OverviewReader
from tenantq.web.views import templates


@dataclass(frozen=True)
class SearchText:
    """The filters the Jobs and DLQ searches share, as query text (empty = any): a tenant, a
    job type, an error class (prefix) and a time window."""

    tenant: str = ""
    job_type: str = ""
    error_class: str = ""
    since: str = ""
    until: str = ""


class Console:
    """The collaborators of one console, built once in ``create_app``."""

    def __init__(self, settings: Settings) -> None:
        web = settings.web
        self.settings = settings
        self.guard = Guard(web.token)
        self.database = Database(settings)
        self.sessions = Sessions(self.database, self.guard, seconds=web.session_hours * 3600)
        self.metrics = ConsoleMetrics()
        self.failed_logins = FailedLogins(
            per_client=web.login_failures_per_client,
            overall=web.login_failures_overall,
            events=self.metrics,
        )
        self.proxies = Proxies(web.trusted_proxies)
        #: Host names answered (None: any); see ``tenantq.web.exposure``.
        self.allowed_hosts = allowed_hosts(settings)
        self.probe = BacklogProbe(settings, timeout=settings.web.kafka_timeout_seconds)
        self.overview = OverviewReader(settings, self.database, self.probe)
        self.templates = templates()

    def close(self) -> None:
        """Release connections and clients."""
        self.database.close()
        self.probe.close()


def console_of(request: Request) -> Console:
    """The console serving ``request``."""
    console: Console = request.app.state.console
    return console


def declared_queue(request: Request, queue: str) -> str:
    """``queue``, if this console's settings declare it; else 404."""
    if queue not in console_of(request).settings.queues:
        raise HTTPException(404, f"queue {queue!r} is not declared")
    return queue


def job_id_of(text: str) -> uuid.UUID:
    """The job id written in ``text``; else 404."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise HTTPException(404, f"{quoted(text)} is not a job id (a UUID)") from None


def session_of(request: Request) -> Session | None:
    """The live sign-in of the request (found by the gate), if any."""
    session: Session | None = getattr(request.state, "session", None)
    return session


def csrf_binding(request: Request) -> str | None:
    """What the request's CSRF tokens are bound to: its session, else its CSRF cookie's
    nonce (None when it brought no cookie: no token can match then)."""
    session = session_of(request)
    if session is not None:
        return session_binding(session.id)
    return nonce_binding(request.state.csrf_nonce_from_cookie)


def render(
    request: Request,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    status: int = 200,
    page: str = "",
) -> HTMLResponse:
    """A page with the context every template expects (user, read-only flag, CSRF token)."""
    console = console_of(request)
    session = session_of(request)
    binding = (
        session_binding(session.id)
        if session is not None
        else nonce_binding(request.state.csrf_nonce)
    )
    base = {
        "page": page,
        "user": session.user if session is not None else None,
        "read_only": console.guard.read_only,
        "csrf_field": CSRF_FIELD,
        "csrf_token": console.guard.csrf_token(binding or ""),
        "refresh_seconds": console.settings.web.refresh_seconds,
        "queues": sorted(console.settings.queues),
        "topic_prefix": console.settings.topic_prefix,
    }
    base.update(context or {})
    response: HTMLResponse = console.templates.TemplateResponse(
        request, template, base, status_code=status
    )
    return response


async def acting(request: Request) -> Actor:
    """The actor of an action (POST), or ``NotAllowed`` raised to the handler.

    The gate authenticated it before the body was read; what is left is the CSRF check of a
    signed-in user, whose token is bound to the session: a form's ``csrf`` field, a script's
    ``X-CSRF-Token`` header. Scripts holding the bearer token need neither.
    """
    actor: Actor | None = getattr(request.state, "actor", None)
    if actor is None:
        raise NotAllowed(401, "sign in with the console token to act")
    if actor.via != "session":
        return actor
    csrf_token = request.headers.get(CSRF_HEADER)
    content_type = request.headers.get("content-type", "")
    if csrf_token is None and content_type.startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        csrf_token = value if isinstance(value, str) else None
    console_of(request).guard.require_csrf(csrf_binding(request), csrf_token)
    return actor
