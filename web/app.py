"""``create_app(settings)``: the console as an ASGI application (FastAPI on Starlette, Jinja2
templates, served by uvicorn in ``tenantq web``).

Cross-cutting rules live in their own modules: the gate in front of every route
(``gate``: Host check, who acts, body limits, security headers), signing in and out
(``sign_in``, ``sessions``, ``login_limiter``), and how errors look (``errors``: an API caller
gets JSON, a person a page that says what went wrong; database down is a 503 that names the
reason, never a 500). What the bind address implies (token length, Host names) is
``exposure``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

from tenantq.log import log_event
from tenantq.settings import Settings
from tenantq.web import api, dead_letters, errors, pages, sign_in, tenant_limits
from tenantq.web.console import Console, console_of
from tenantq.web.exposure import start_warnings
from tenantq.web.gate import ConsoleGate

logger = logging.getLogger("tenantq.web")

#: How uvicorn must serve the console: the gate alone decides which forwarding headers to
#: believe (``web.trusted_proxies``), and the answer does not name the server.
SERVER_OPTIONS: dict[str, Any] = {"proxy_headers": False, "server_header": False}


def create_app(settings: Settings) -> FastAPI:
    """The console for ``settings`` (its ``web`` section: token, bind address, limits, ...).

    ``ConfigurationError`` when the token is too short for the bind address
    (``tenantq.web.exposure``); what is merely unwise is logged as a warning.
    """
    for warning in start_warnings(settings):
        log_event(logger, "web.start.warning", logging.WARNING, warning=warning)
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
    app.add_middleware(ConsoleGate, console=console)
    app.include_router(pages.router)
    app.include_router(dead_letters.router)
    app.include_router(api.router)
    app.include_router(tenant_limits.api_router)
    app.include_router(sign_in.router)
    app.add_api_route("/metrics", _metrics, methods=["GET"], include_in_schema=False)
    errors.install(app)
    return app


def _metrics(request: Request) -> Response:
    metrics = console_of(request).metrics
    return Response(metrics.exposition(), media_type=metrics.content_type)
