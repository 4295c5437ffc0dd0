"""What every route of the console shares: its collaborators (``Console``), rendering a page
with the common context, and the check that guards every action (``acting``)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from tenantq.observability.consumer_lag import BacklogProbe
from tenantq.settings import Settings
from tenantq.web.database import Database
from tenantq.web.security import (
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    Actor,
    Guard,
)
from tenantq.web.state import OverviewReader
from tenantq.web.views import templates


class Console:
    """The collaborators of one console, built once in ``create_app``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.guard = Guard(settings.web.token, session_seconds=settings.web.session_hours * 3600)
        self.database = Database(settings)
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
        raise HTTPException(404, f"{text!r} is not a job id (a UUID)") from None


def signed_in_user(request: Request) -> str | None:
    """The console user of the request's session cookie, if any."""
    return console_of(request).guard.session_user(request.cookies.get(SESSION_COOKIE))


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
    nonce: str = request.state.csrf_nonce
    base = {
        "page": page,
        "user": signed_in_user(request),
        "read_only": console.guard.read_only,
        "csrf_field": CSRF_FIELD,
        "csrf_token": console.guard.csrf_token(nonce),
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
    """The actor of an action (POST), or ``NotAllowed`` (401/403) raised to the handler.

    A form's CSRF token is read from its ``csrf`` field, a script's from ``X-CSRF-Token``;
    scripts holding the bearer token need neither.
    """
    console = console_of(request)
    csrf_token = request.headers.get(CSRF_HEADER)
    content_type = request.headers.get("content-type", "")
    if csrf_token is None and content_type.startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        csrf_token = value if isinstance(value, str) else None
    return console.guard.authorize(
        authorization=request.headers.get("authorization"),
        session_cookie=request.cookies.get(SESSION_COOKIE),
        csrf_nonce=request.state.csrf_nonce_from_cookie,
        csrf_token=csrf_token,
        origin=request.headers.get("origin"),
        host=request.headers.get("host"),
        actor_hint=request.headers.get("x-tenantq-actor"),
    )
