"""Signing in and out of the console.

Signing in checks the form's CSRF token, the user name (it goes into audit rows), the
failed-login limiter (429 before the token is even compared) and the token; a right token
opens a session (``tenantq.web.sessions``) and ends the one the browser had. Signing out ends
the session in PostgreSQL, so a saved copy of the cookie stops acting too.
"""

from __future__ import annotations

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from tenantq.errors import DatabaseUnavailable
from tenantq.web.console import console_of, csrf_binding, render, session_of
from tenantq.web.errors import error_response
from tenantq.web.security import (
    SESSION_COOKIE,
    USER_NAME,
    USER_NAME_RULE,
    NotAllowed,
    cookie_header,
)

router = APIRouter(include_in_schema=False)

#: Longest ``next`` path kept; a longer one goes to the overview.
LONGEST_NEXT = 2_000


def safe_next(target: str | None) -> str:
    """Only paths of this console: never an open redirect to another site. Browsers read
    ``/\\host`` and ``/<tab>/host`` as ``//host``, so backslashes and control characters are
    refused with the leading ``//``."""
    if (
        not target
        or len(target) > LONGEST_NEXT
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ord(character) < 0x20 or ord(character) == 0x7F for character in target)
    ):
        return "/"
    return target


@router.get("/login")
def login_page(request: Request, next: str = Query("/")) -> Response:
    """The sign-in form."""
    return render(request, "login.html", {"next": safe_next(next), "failed": None})


@router.post("/login")
def login(
    request: Request,
    user: str = Form(""),
    token: str = Form(""),
    csrf: str = Form(""),
    next: str = Form("/"),
) -> Response:
    """Sign in with a name and the console token."""
    console = console_of(request)
    guard = console.guard
    guard.require_csrf(csrf_binding(request), csrf)
    address = request.state.caller.address
    failed = None
    if guard.read_only:
        failed = "the console is read-only: no TENANTQ_WEB__TOKEN is configured"
    elif not USER_NAME.match(user):
        failed = f"your name: {USER_NAME_RULE} (it goes into audit rows)"
    else:
        refusal = console.failed_logins.refusal(address)
        if refusal is not None:
            raise NotAllowed(
                429,
                f"too many wrong tokens: try again in {refusal.retry_after}s",
                retry_after=refusal.retry_after,
            )
        if not guard.token_matches(token):
            console.failed_logins.failed(address, "login")
            failed = "the token does not match"
    if failed is not None:
        context = {"next": safe_next(next), "failed": failed, "name": user[:64]}
        return render(request, "login.html", context, status=401)
    previous = session_of(request)
    session, cookie = console.sessions.open(user)
    if previous is not None and previous.id != session.id:
        console.sessions.end(previous)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.headers.append(
        "set-cookie",
        cookie_header(
            SESSION_COOKIE,
            cookie,
            secure=request.state.caller.https,
            max_age=int(console.sessions.seconds),
        ),
    )
    return response


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> Response:
    """Sign out: the session ends in PostgreSQL and the browser forgets the cookie. A form
    without the session's CSRF token cannot sign anyone out; without a live session there is
    nothing to end."""
    console = console_of(request)
    session = session_of(request)
    response: Response = RedirectResponse("/", status_code=303)
    if session is not None:
        console.guard.require_csrf(csrf_binding(request), csrf)
        try:
            console.sessions.end(session)
        except DatabaseUnavailable as error:
            response = error_response(
                request,
                503,
                f"signed out of this browser only: the session could not be ended ({error}); "
                "a saved copy of its cookie acts until it expires",
                title="Sign-out not complete",
            )
    response.headers.append(
        "set-cookie",
        cookie_header(SESSION_COOKIE, "", secure=request.state.caller.https, delete=True),
    )
    return response
