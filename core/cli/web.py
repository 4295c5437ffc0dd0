"""``tenantq web``: serve the on-call console (``pip install "tenantq[web]"``)."""

from __future__ import annotations

import typer

from tenantq.errors import ConfigurationError
from tenantq.settings import load_settings


def register(app: typer.Typer) -> None:
    """Add ``tenantq web`` to the command line."""
    app.command("web")(web_command)


def web_command(
    host: str | None = typer.Option(
        None, "--host", help="Bind address (default TENANTQ_WEB__HOST, 127.0.0.1)."
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65_535, help="Port (default TENANTQ_WEB__PORT, 8765)."
    ),
) -> None:
    """Serve the web console: queues, tenants, jobs, workers and the DLQ. Read-only unless
    TENANTQ_WEB__TOKEN is set (16 characters at least beyond localhost); every action then
    needs that token."""
    settings = load_settings()
    try:
        import uvicorn

        from tenantq.web.app import SERVER_OPTIONS, create_app
    except ImportError as error:
        raise ConfigurationError(
            f'the console needs its extra: pip install "tenantq[web]" ({error.name} missing)'
        ) from None
    from tenantq.log import configure_logging

    web = settings.web.model_copy(
        update={
            "host": host or settings.web.host,
            "port": settings.web.port if port is None else port,
        }
    )
    settings = settings.model_copy(update={"web": web})
    configure_logging(settings.log_level)
    app = create_app(settings)
    mode = (
        "read-only (no TENANTQ_WEB__TOKEN)"
        if app.state.console.guard.read_only
        else "actions need the token"
    )
    shown = f"[{web.host}]" if ":" in web.host else web.host
    typer.echo(f"tenantq console on http://{shown}:{web.port}/ — {mode}", err=True)
    uvicorn.run(app, host=web.host, port=web.port, log_level="warning", **SERVER_OPTIONS)
