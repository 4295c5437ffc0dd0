"""How the console's errors look: an API caller gets ``{"error": "..."}`` with the status, a
person gets a page that says what went wrong; bad input is a 4xx that says which value and
why, never a 500.

An error message never carries more than ``messages.LONGEST_REASON`` characters, so a huge
value in a request is not echoed back. Every answer, errors and the last-resort 500 included,
carries ``SECURITY_HEADERS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from tenantq.errors import DatabaseUnavailable
from tenantq.web.console import render
from tenantq.web.job_actions import JobActionError
from tenantq.web.messages import shorten
from tenantq.web.security import NotAllowed

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
#: Validation problems named in one answer; the rest are counted.
PROBLEMS_NAMED = 5
TITLES = {
    400: "Bad request",
    401: "Not allowed",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    413: "Request too large",
    422: "Bad request",
    429: "Too many wrong tokens",
    503: "Unavailable",
}


def error_response(
    request: Request,
    status: int,
    reason: str,
    *,
    title: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The error answer for ``request``: JSON under ``/api/``, else the error page."""
    reason = shorten(reason)
    response: Response
    if str(request.scope.get("path", "")).startswith("/api/"):
        response = JSONResponse({"error": reason}, status_code=status)
    else:
        context = {"title": title or TITLES.get(status, "Error"), "reason": reason}
        response = render(request, "error.html", context, status=status)
    response.headers.update(headers or {})
    return response


def describe_validation(problems: Sequence[Any]) -> str:
    """Pydantic's problems as one line naming each value, never quoting what was sent."""
    parts = []
    for problem in problems[:PROBLEMS_NAMED]:
        location = [str(part) for part in problem.get("loc", ())]
        if problem.get("type") == "json_invalid":
            location, message = ["body"], "not valid JSON"
        else:
            message = str(problem.get("msg", "invalid"))
        # ("query", "limit") -> limit; ("body", "job_ids", 3) -> job_ids.3
        named = location[1:] if location[:1] and location[0] in _SOURCES else location
        where = ".".join(named) or (location[0] if location else "request")
        parts.append(f"{shorten(where, 60)}: {shorten(message, 120)}")
    if len(problems) > PROBLEMS_NAMED:
        parts.append(f"and {len(problems) - PROBLEMS_NAMED} more")
    return "; ".join(parts) or "the request is not valid"


_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})


def install(app: FastAPI) -> None:
    """Register the console's error handlers on ``app``."""
    app.add_exception_handler(NotAllowed, _not_allowed)  # type: ignore[arg-type]
    app.add_exception_handler(DatabaseUnavailable, _database_unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(JobActionError, _action_failed)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)


def refusal_headers(error: NotAllowed) -> dict[str, str]:
    """What a refusal adds: the scheme to authenticate with, or when to try again."""
    if error.status == 401:
        return {"www-authenticate": 'Bearer realm="tenantq"'}
    if error.status == 429 and error.retry_after is not None:
        return {"retry-after": str(error.retry_after)}
    return {}


async def _not_allowed(request: Request, error: NotAllowed) -> Response:
    return error_response(request, error.status, error.reason, headers=refusal_headers(error))


async def _database_unavailable(request: Request, error: DatabaseUnavailable) -> Response:
    return error_response(request, 503, str(error), title="Database unavailable")


async def _action_failed(request: Request, error: JobActionError) -> Response:
    return error_response(request, error.status, error.reason, title="Action not done")


async def _http_error(request: Request, error: HTTPException) -> Response:
    return error_response(request, error.status_code, str(error.detail), headers=error.headers)


async def _invalid(request: Request, error: RequestValidationError) -> Response:
    return error_response(request, 422, describe_validation(error.errors()))


async def _internal_error(request: Request, error: Exception) -> Response:
    # Served outside every middleware (Starlette's last resort), so it brings its own headers;
    # plain text, as rendering a page is what may have failed.
    return PlainTextResponse(
        "internal error: the console's log has the details",
        status_code=500,
        headers=SECURITY_HEADERS,
    )
