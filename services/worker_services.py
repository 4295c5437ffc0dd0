"""The background services every ``tenantq worker`` of an app runs, chosen by the settings."""

from __future__ import annotations

from collections.abc import Sequence

from tenantq.app import App
from tenantq.background import BackgroundService
from tenantq.consumer.lane_keeper import LaneKeeper
from tenantq.outbox.relay import RelayService
from tenantq.periodic.scheduler import PeriodicScheduler
from tenantq.retention.pruner import Pruner
from tenantq.settings import Settings


def background_services(
    app: App, settings: Settings, queues: Sequence[str]
) -> list[BackgroundService]:
    """The services every ``tenantq worker`` of ``app`` runs for ``queues``, each switchable
    off by a setting: the outbox relay of those queues (``TENANTQ_OUTBOX__RELAY_IN_WORKER``),
    the periodic scheduler of the app's schedules (``TENANTQ_PERIODIC__ENABLED``; none
    without schedules), the retention pruner (``TENANTQ_RETENTION__ENABLED``) and the keeper
    that brings tenants back from drained hot lanes (``TENANTQ_TENANT_ISOLATION__HOT_LANE``)."""
    services: list[BackgroundService] = []
    served = list(queues) or app.queues() or sorted(settings.queues)
    if settings.outbox.relay_in_worker:
        services.append(RelayService(settings, served))
    if settings.periodic.enabled and app.schedules:
        services.append(PeriodicScheduler(app, settings))
    if settings.retention.enabled:
        services.append(Pruner(settings))
    if settings.tenant_isolation.hot_lane:
        services.append(LaneKeeper(settings, served))
    return services
