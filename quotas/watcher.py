"""``QuotaWatcher``: keeps a worker's ``QuotaBook`` fresh.

It listens on the channel every change of ``tenantq_tenants`` notifies (``LISTEN
tenantq_tenants``, on a connection of its own, in a thread of its own) and rereads the table
when its deployment's limits change, and every ``REFRESH_SECONDS`` besides: a notification
missed (a reconnect, a pooler that drops them) is made up within that. A lost connection is a
failed round of the loop: logged once, tried again with its backoff; the book keeps the copy
it has meanwhile.
"""

from __future__ import annotations

import threading
import time

from tenantq.background import ServiceLoop
from tenantq.quotas.book import QuotaBook
from tenantq.settings import Settings
from tenantq.store.engine import DeploymentConnection, LazyConnection
from tenantq.store.quotas import TENANTS_LISTEN, tenant_limit_list

#: The longest a worker's copy goes without a reread.
REFRESH_SECONDS = 1.0


class QuotaWatcher(ServiceLoop):
    """Rereads the deployment's limits into ``book`` when they change (see the module
    docstring)."""

    def __init__(
        self, settings: Settings, book: QuotaBook, refresh_seconds: float = REFRESH_SECONDS
    ) -> None:
        super().__init__("quota-watch")
        self._book = book
        self._deployment = settings.topic_prefix
        self._refresh_seconds = refresh_seconds
        #: When the table was last read (``time.monotonic``; the loop's thread).
        self._read_at = float("-inf")
        #: Set once the book holds the table as read at least once.
        self.loaded = threading.Event()
        self._database = LazyConnection(
            settings, "tenantq-quota-watch", autocommit=True, on_open=self._listen
        )

    def _listen(self, connection: DeploymentConnection) -> None:
        connection.execute(TENANTS_LISTEN)
        # Changes made while nobody listened are unknown: read it all now.
        self._read(connection)

    def _read(self, connection: DeploymentConnection) -> None:
        self._book.replace(tenant_limit_list(connection))
        self._read_at = time.monotonic()
        self.loaded.set()

    def run_round(self) -> float:
        connection = self._database.get()
        wait = max(0.0, self._read_at + self._refresh_seconds - time.monotonic())
        changed = False
        for notify in self.wait_for_notifies(connection, wait):
            changed = changed or notify.payload in (self._deployment, "")
        if changed or time.monotonic() >= self._read_at + self._refresh_seconds:
            self._read(connection)
        return 0.0

    def reset(self) -> None:
        self._database.close()
