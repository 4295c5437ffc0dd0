"""``create_app(settings)``: the console as an ASGI application (FastAPI on Starlette, Jinja2
templates, served by uvicorn in ``tenantq web``).

Cross-cutting rules live here: the CSRF cookie and security headers on every response (a
strict Content-Security-Policy: no inline script, nothing from another origin), sign in and
out, and how errors look: an API caller gets JSON, a person gets a page that says what went
wrong (database down is a 503 page that names the reason, never a 500).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Form, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from tenantq.errors import DatabaseUnavailable
from tenantq.settings import Settings
from tenantq.web import api, dead_letters, pages
from tenantq.web.console import Console, console_of, render
from tenantq.web.job_actions import JobActionError
from tenantq.web.security import CSRF_COOKIE, SESSION_COOKIE, USER_NAME, NotAllowed

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


def create_app(settings: Settings) -> FastAPI:
    """The console for ``settings`` (its ``web`` section: token, refresh, ...)."""
    console = Console(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        console.close()

    # No /docs: Swagger UI would load its scripts from a CDN. The schema stays available.
    app = FastAPI(
        title="tenantq console",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
        lifespan=lifespan,
    )
    app.state.console = console
    static = resources.files("tenantq.web") / "static"
    # Strict editable installs link each file to the source tree: follow those links.
    app.mount("/static", StaticFiles(directory=str(static), follow_symlink=True), name="static")
    app.middleware("http")(_csrf_cookie_and_headers)
    app.include_router(pages.router)
    app.include_router(dead_letters.router)
    app.include_router(api.router)
    app.add_api_route("/login", _login_page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/login", _login, methods=["POST"], include_in_schema=False)
    app.add_api_route("/logout", _logout, methods=["POST"], include_in_schema=False)
    app.add_exception_handler(NotAllowed, _not_allowed)  # type: ignore[arg-type]
    app.add_exception_handler(DatabaseUnavailable, _database_unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(JobActionError, _action_failed)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    return app


async def _csrf_cookie_and_headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    cookie = request.cookies.get(CSRF_COOKIE)
    request.state.csrf_nonce_from_cookie = cookie
    request.state.csrf_nonce = cookie or console_of(request).guard.new_nonce()
    response = await call_next(request)
    if cookie is None:
        response.set_cookie(
            CSRF_COOKIE, request.state.csrf_nonce, httponly=True, samesite="strict", path="/"
        )
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _error(request: Request, status: int, title: str, reason: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": reason}, status_code=status)
    return render(request, "error.html", {"title": title, "reason": reason}, status=status)


async def _not_allowed(request: Request, error: NotAllowed) -> Response:
    response = _error(request, error.status, "Not allowed", error.reason)
    if error.status == 401:
        response.headers["www-authenticate"] = 'Bearer realm="tenantq"'
    return response


async def _database_unavailable(request: Request, error: DatabaseUnavailable) -> Response:
    return _error(request, 503, "Database unavailable", str(error))


async def _action_failed(request: Request, error: JobActionError) -> Response:
    return _error(request, error.status, "Action not done", error.reason)


async def _http_error(request: Request, error: HTTPException) -> Response:
    titles = {404: "Not found", 405: "Method not allowed", 400: "Bad request"}
    return _error(request, error.status_code, titles.get(error.status_code, "Error"), error.detail)


def _safe_next(target: str | None) -> str:
    """Only paths of this console: never an open redirect to another site."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


async def _login_page(request: Request, next: str | None = None) -> Response:
    return render(request, "login.html", {"next": _safe_next(next), "failed": None})


async def _login(
    request: Request,
    user: str = Form(""),
    token: str = Form(""),
    csrf: str = Form(""),
    next: str = Form("/"),
) -> Response:
    console = console_of(request)
    guard = console.guard
    guard.require_csrf(request.state.csrf_nonce_from_cookie, csrf)
    failed = None
    if guard.read_only:
        failed = "the console is read-only: no TENANTQ_WEB__TOKEN is configured"
    elif not USER_NAME.match(user):
        failed = "your name: 1-64 letters, digits or . _ @ - (it goes into audit rows)"
    elif not guard.token_matches(token):
        failed = "the token does not match"
    if failed is not None:
        context = {"next": _safe_next(next), "failed": failed, "name": user}
        return render(request, "login.html", context, status=401)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        guard.issue_session(user),
        max_age=int(guard.session_seconds),
        httponly=True,
        samesite="strict",
        path="/",
    )
    return response


async def _logout(request: Request, csrf: str = Form("")) -> Response:
    console_of(request).guard.require_csrf(request.state.csrf_nonce_from_cookie, csrf)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
