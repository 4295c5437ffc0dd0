"""``TenantLimits``: the tenant limits one worker claims under, and the threads that keep them
fresh.

A worker's claims read two books: the deployment's limits (``QuotaBook``, reread by the
``QuotaWatcher`` when ``tenantq_tenants`` changes) and this member's view of its queues'
shares by weight (``ShareBook``, synced with the fleet's by ``ShareSync``). A worker that
follows neither (``following=False``: the share-group spike) claims under the defaults alone.
"""

from __future__ import annotations

from tenantq.quotas.book import QuotaBook
from tenantq.quotas.shares import ShareBook, ShareSync
from tenantq.quotas.watcher import QuotaWatcher
from tenantq.settings import Settings

#: How long ``stop`` waits for each of the two threads.
STOP_SECONDS = 2.0


class TenantLimits:
    """The books a worker's claims read (any thread reads them), and their watchers."""

    def __init__(self, settings: Settings, queues: list[str], *, following: bool = True) -> None:
        self.book = book = QuotaBook(settings.tenant_defaults)
        self.shares = ShareBook(book.weight)
        self._watcher: QuotaWatcher | None = None
        self._sync: ShareSync | None = None
        if following:
            self._watcher = QuotaWatcher(settings, book)
            self._sync = ShareSync(settings, self.shares, lambda: book.fair_of(queues))
        else:
            book.replace([])  # the defaults' book, never synced with the fleet

    def start(self) -> None:
        """Start following the deployment's limits and the fleet's shares."""
        if self._watcher is not None and self._sync is not None:
            self._watcher.start()
            self._sync.start()

    def stop(self) -> None:
        """Stop following (each thread waited for at most ``STOP_SECONDS``)."""
        if self._watcher is not None and self._sync is not None:
            self._watcher.stop(STOP_SECONDS)
            self._sync.stop(STOP_SECONDS)
