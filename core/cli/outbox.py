"""``tenantq outbox relay``: publish committed outbox entries (also inside every worker)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import typer
from rich.console import Console

from tenantq.cli.access import check_access
from tenantq.log import configure_logging
from tenantq.settings import load_settings

console = Console()
outbox_app = typer.Typer(help="The transactional outbox: jobs enqueued inside transactions.")


def register(app: typer.Typer) -> None:
    """Add ``tenantq outbox`` to the command line."""
    app.add_typer(outbox_app, name="outbox")


@outbox_app.command("relay")
def relay_command(
    queue: list[str] | None = typer.Option(
        None, "--queue", "-q", metavar="QUEUE", help="Only this queue (repeatable); default: all."
    ),
    once: bool = typer.Option(
        False,
        "--once",
        help="Publish what is committed now in the queues no other relay holds, then exit.",
    ),
) -> None:
    """Publish committed outbox entries to Kafka until SIGTERM or Ctrl-C. One relay per queue
    is active at a time (an advisory lock); the others stand by and take over when it ends."""
    from tenantq.outbox.relay import RelayService

    settings = load_settings()
    queues = queue or sorted(settings.queues)
    check_access(settings)
    service = RelayService(settings, queues)
    if once:
        try:
            published = service.drain()
            held = {service.main_topics[topic] for topic in service.held}
        finally:
            service.close()
        for name in queues:
            if name not in held:
                console.print(f"queue {name}: another relay is active; left to it")
        console.print(f"published {published} outbox entries", highlight=False)
        return
    configure_logging(settings.log_level)
    stopped = threading.Event()

    def stop(_signal: int, _frame: Any) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    service.start()
    stopped.wait()
    service.stop(timeout=settings.outbox.publish_timeout_seconds + 5)
