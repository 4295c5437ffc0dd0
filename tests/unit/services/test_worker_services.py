"""``background_services``: a worker runs what the settings switch on, and the periodic
scheduler only for an app with schedules."""

from __future__ import annotations

from pathlib import Path

import fakes

import tenantq
from tenantq.services.worker_services import background_services
from tenantq.settings import (
    OutboxSettings,
    PeriodicSettings,
    RetentionSettings,
    TenantIsolationSettings,
)


def test_background_services_follow_the_settings(tmp_path: Path) -> None:
    app = tenantq.App()
    everything = fakes.make_settings(tmp_path)
    assert [s.name for s in background_services(app, everything, ["default"])] == [
        "outbox-relay",
        "pruner",
        "lane-keeper",
    ]
    app.periodic("beat", job_type="ping", tenant="ops", every=5)
    assert [s.name for s in background_services(app, everything, [])] == [
        "outbox-relay",
        "periodic",
        "pruner",
        "lane-keeper",
    ]
    nothing = fakes.make_settings(
        tmp_path,
        outbox=OutboxSettings(relay_in_worker=False),
        periodic=PeriodicSettings(enabled=False),
        retention=RetentionSettings(enabled=False),
        tenant_isolation=TenantIsolationSettings(hot_lane=False),
    )
    assert background_services(app, nothing, ["default"]) == []
