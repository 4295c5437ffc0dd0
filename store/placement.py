"""SQL of the tenant placement table (``tenantq_tenant_placement``), run with psycopg 3.

Named, noun-first statements, one small function each. The producer reads placements through
``PlacementReader``, which keeps one connection and reconnects after a failure.

Every write of the table also notifies the channel ``tenantq_placement`` (the payload: the
deployment and the queue, ``<deployment>/<queue>``), in its transaction: ``PlacementWatcher``
listens, so producers and workers reread a queue's placements as soon as they change instead
of at their next refresh. The refresh stays as the fallback for a missed notification (a
reconnect, or a pooler that drops them).

A placement belongs to one deployment (the topic prefix of the connection's settings,
``DeploymentConnection``): each deployment on a database has its own, and its workers never
move or release another's tenants.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from tenantq.background import ServiceLoop
from tenantq.partitioner.placement import Placement
from tenantq.settings import Settings
from tenantq.store.engine import DeploymentConnection, LazyConnection, connect

PLACEMENT_CHANGED = "SELECT pg_notify('tenantq_placement', %(deployment)s || '/' || %(queue)s)"

PLACEMENT_LISTEN = "LISTEN tenantq_placement"

PLACEMENT_LIST = """
SELECT queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic
FROM tenantq_tenant_placement
WHERE deployment = %(deployment)s AND queue = %(queue)s
ORDER BY tenant_id
"""

PLACEMENT_LIST_ALL = """
SELECT queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic
FROM tenantq_tenant_placement
WHERE deployment = %(deployment)s
ORDER BY queue, tenant_id
"""

#: An operator's placement (``tenantq placement set``): it replaces whatever was there, a
#: worker's hot-lane move included, and no worker takes it back.
PLACEMENT_UPSERT = """
INSERT INTO tenantq_tenant_placement (deployment, queue, tenant_id, mode, shards, partitions,
                                      updated_by, reason, automatic)
VALUES (%(deployment)s, %(queue)s, %(tenant_id)s, %(mode)s, %(shards)s, %(partitions)s,
        %(updated_by)s, %(reason)s, false)
ON CONFLICT (deployment, queue, tenant_id) DO UPDATE
SET mode = EXCLUDED.mode,
    shards = EXCLUDED.shards,
    partitions = EXCLUDED.partitions,
    updated_by = EXCLUDED.updated_by,
    reason = EXCLUDED.reason,
    automatic = false,
    updated_at = now()
RETURNING queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic
"""

#: A worker moves a hot tenant to its queue's lane. Only a tenant without a placement of an
#: operator's is moved: an operator's word (even "hashed") stands.
LANE_ENTER = """
INSERT INTO tenantq_tenant_placement AS p (deployment, queue, tenant_id, mode, updated_by,
                                           reason, automatic)
VALUES (%(deployment)s, %(queue)s, %(tenant_id)s, 'lane', %(updated_by)s, %(reason)s, true)
ON CONFLICT (deployment, queue, tenant_id) DO UPDATE
SET mode = 'lane', updated_by = EXCLUDED.updated_by, reason = EXCLUDED.reason,
    updated_at = now()
WHERE p.automatic AND p.mode = 'lane'
RETURNING queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic
"""

#: Tenants a worker moved to the lane at least ``seconds`` ago go back to hashed.
LANE_RELEASE = """
DELETE FROM tenantq_tenant_placement
WHERE deployment = %(deployment)s AND queue = %(queue)s AND mode = 'lane' AND automatic
  AND updated_at < now() - make_interval(secs => %(seconds)s)
RETURNING tenant_id
"""

PLACEMENT_DELETE = """
DELETE FROM tenantq_tenant_placement
WHERE deployment = %(deployment)s AND queue = %(queue)s AND tenant_id = %(tenant_id)s
"""


@dataclass(frozen=True)
class PlacementRecord:
    """One row of ``tenantq_tenant_placement``."""

    queue: str
    tenant_id: str
    mode: str
    shards: int | None
    partitions: tuple[int, ...]
    updated_at: dt.datetime | None = None
    updated_by: str | None = None
    reason: str | None = None
    #: Put there by a worker (the hot lane), which may take it back; else an operator's.
    automatic: bool = False


def _record(row: Sequence[Any]) -> PlacementRecord:
    queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic = row
    return PlacementRecord(
        queue=queue,
        tenant_id=tenant_id,
        mode=mode,
        shards=shards,
        partitions=tuple(partitions or ()),
        updated_at=updated_at,
        updated_by=updated_by,
        reason=reason,
        automatic=bool(automatic),
    )


def placement_list(
    connection: DeploymentConnection, queue: str | None = None
) -> list[PlacementRecord]:
    """The placements of ``queue``, or of every queue when ``queue`` is None."""
    deployment = connection.deployment
    with connection.cursor() as cursor:
        if queue is None:
            cursor.execute(PLACEMENT_LIST_ALL, {"deployment": deployment})
        else:
            cursor.execute(PLACEMENT_LIST, {"deployment": deployment, "queue": queue})
        return [_record(row) for row in cursor.fetchall()]


def placement_upsert(
    connection: DeploymentConnection,
    *,
    queue: str,
    tenant_id: str,
    placement: Placement,
    updated_by: str | None = None,
    reason: str | None = None,
) -> PlacementRecord:
    """Create or replace a tenant's placement (an operator's: no worker takes it back). The
    table's CHECK constraints refuse a spread without shards or a pin without partitions."""
    with connection.cursor() as cursor:
        cursor.execute(
            PLACEMENT_UPSERT,
            {
                "deployment": connection.deployment,
                "queue": queue,
                "tenant_id": tenant_id,
                "mode": placement.mode,
                "shards": placement.shards,
                "partitions": list(placement.partitions) or None,
                "updated_by": updated_by,
                "reason": reason,
            },
        )
        row = cursor.fetchone()
        placement_changed(cursor, connection.deployment, queue)
    assert row is not None
    return _record(row)


def placement_delete(connection: DeploymentConnection, *, queue: str, tenant_id: str) -> bool:
    """Remove a tenant's placement (it falls back to hashed). True if a row was deleted."""
    deployment = connection.deployment
    with connection.cursor() as cursor:
        cursor.execute(
            PLACEMENT_DELETE, {"deployment": deployment, "queue": queue, "tenant_id": tenant_id}
        )
        deleted = cursor.rowcount > 0
        if deleted:
            placement_changed(cursor, deployment, queue)
        return deleted


def lane_release(connection: DeploymentConnection, *, queue: str, seconds: float) -> list[str]:
    """Tenants a worker moved to the lane of ``queue`` at least ``seconds`` ago go back to
    hashed; returns them."""
    deployment = connection.deployment
    with connection.cursor() as cursor:
        cursor.execute(LANE_RELEASE, {"deployment": deployment, "queue": queue, "seconds": seconds})
        released = [row[0] for row in cursor.fetchall()]
        if released:
            placement_changed(cursor, deployment, queue)
        return released


def placement_changed(cursor: psycopg.Cursor[Any], deployment: str, queue: str) -> None:
    """Tell the listeners (``PlacementWatcher``) that the placements of ``deployment``'s
    ``queue`` changed; sent when the transaction commits."""
    cursor.execute(PLACEMENT_CHANGED, {"deployment": deployment, "queue": queue})


def changed_queue(payload: str, deployment: str) -> tuple[bool, str | None]:
    """A ``PLACEMENT_CHANGED`` payload as (of ``deployment``, its queue): a prefix has no
    ``/``, so the first one ends it. An empty or unreadable payload may be anyone's, any
    queue (True, None)."""
    owner, separator, queue = payload.partition("/")
    if not separator:
        return True, None
    return owner == deployment, queue or None


#: Tenants in the hot lane of each queue (for the metrics and ``tenantq stats``).
LANE_MEMBERS = """
SELECT queue, tenant_id, mode, shards, partitions, updated_at, updated_by, reason, automatic
FROM tenantq_tenant_placement
WHERE deployment = %(deployment)s AND mode = 'lane'
  AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
ORDER BY queue, updated_at
"""


def lane_records(
    connection: DeploymentConnection, queues: Sequence[str] | None = None
) -> dict[str, list[PlacementRecord]]:
    """Per queue, the placements of the tenants in its hot lane, longest there first."""
    found: dict[str, list[PlacementRecord]] = {}
    parameters = {
        "deployment": connection.deployment,
        "queues": list(queues) if queues is not None else None,
    }
    with connection.cursor() as cursor:
        cursor.execute(LANE_MEMBERS, parameters)
        for row in cursor.fetchall():
            found.setdefault(row[0], []).append(_record(row))
    return found


def lane_members(
    connection: DeploymentConnection, queues: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """Per queue, the tenants in its hot lane, longest there first."""
    return {
        queue: [record.tenant_id for record in records]
        for queue, records in lane_records(connection, queues).items()
    }


class PlacementReader:
    """Reads the placements of the settings' deployment, for producers and workers, over one
    lazily opened autocommit connection."""

    def __init__(self, settings: Settings, connect_timeout_seconds: float = 5.0) -> None:
        settings.require_database_url()
        self._settings = settings
        self._connect_timeout = max(1, int(connect_timeout_seconds))
        self._connection: DeploymentConnection | None = None
        self._lock = threading.Lock()

    def __call__(self, queue: str) -> list[PlacementRecord]:
        with self._lock:
            if self._connection is None or self._connection.closed:
                self._connection = connect(
                    self._settings,
                    autocommit=True,
                    application_name="tenantq-producer",
                    connect_timeout_seconds=self._connect_timeout,
                )
            try:
                return placement_list(self._connection, queue)
            except psycopg.OperationalError:
                # A broken connection is replaced on the next call rather than retried here.
                self._connection.close()
                self._connection = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


class PlacementWatcher(ServiceLoop):
    """Calls ``changed(queue)`` when a placement of the settings' deployment's ``queue``
    changes (``LISTEN`` on a connection of its own, in a thread of its own; other
    deployments' changes are ignored), and ``changed(None)`` each time it starts listening:
    changes made while it was not are unknown. A lost connection is a failed round of the
    loop: logged once, tried again with its backoff."""

    def __init__(self, settings: Settings, changed: Callable[[str | None], None]) -> None:
        super().__init__("placement-watch")
        self._changed = changed
        #: Set while it listens (after the reread that covers what came before).
        self.listening = threading.Event()
        self._deployment = settings.topic_prefix
        self._database = LazyConnection(
            settings, "tenantq-placement-watch", autocommit=True, on_open=self._listen
        )

    def _listen(self, connection: DeploymentConnection) -> None:
        connection.execute(PLACEMENT_LISTEN)
        self._changed(None)
        self.listening.set()

    def run_round(self) -> float:
        connection = self._database.get()
        for notify in self.wait_for_notifies(connection, 1.0):
            ours, queue = changed_queue(notify.payload, self._deployment)
            if ours:
                self._changed(queue)
        return 0.0

    def reset(self) -> None:
        self.listening.clear()
        self._database.close()
