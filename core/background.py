"""Background services: work that runs beside a worker's members, once per ``tenantq worker``.

The supervisor of ``tenantq worker`` starts them before its members and stops them after
(``tenantq.consumer.supervisor``). Each service owns its thread and its database connection,
survives a database or broker outage (it logs the change of state and tries again later), and
coordinates with the services of other workers itself (an advisory lock, a compare-and-set), so
that any number of ``tenantq worker`` processes may run the same services.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tenantq.app import App
    from tenantq.settings import Settings


class BackgroundService(Protocol):
    """A service the supervisor runs: ``start`` returns at once, ``stop`` within ``timeout``."""

    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


def background_services(
    app: App, settings: Settings, queues: Sequence[str]
) -> list[BackgroundService]:
    """The services every ``tenantq worker`` of ``app`` runs for ``queues``."""
    return []
