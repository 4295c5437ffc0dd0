"""``loadtest/hot_partition.py --worker``: a scenario runs with the consumer-group worker, the
share-group spike, or both under names of their own; ``--workers``, ``--partitions`` and
``--concurrency`` reach the workers' settings and the tool's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from hot_partition import (  # noqa: E402
    WORKER_COMMANDS,
    Knobs,
    Shape,
    run_settings,
    scenarios,
    with_worker,
    worker_environment,
)

import tenantq  # noqa: E402


def test_each_worker_kind_has_a_scenario_name_and_a_command_of_its_own() -> None:
    flood = scenarios(Knobs())["flood-100x"]
    group, share = with_worker(flood, "group"), with_worker(flood, "share")
    assert (group.name, group.worker) == ("flood-100x", "group")
    assert (share.name, share.worker) == ("flood-100x-share", "share")
    assert share.phases == flood.phases and share.protection == flood.protection
    assert "tenantq.consumer.share" in WORKER_COMMANDS["share"]
    assert "tenantq.cli" in WORKER_COMMANDS["group"]


def test_the_shape_reaches_the_workers_and_the_tools_settings() -> None:
    base = tenantq.Settings(
        kafka_bootstrap_servers="127.0.0.1:1", database_url="postgresql://u@h/db"
    )
    shape = Shape(workers=4, concurrency=16, partitions=2)
    settings = run_settings(base, "pre", "q", True, shape)
    assert settings.queue("q").partitions == 2
    environment = worker_environment(settings, "q", {}, shape)
    assert json.loads(environment["TENANTQ_QUEUES"]) == {"q": {"partitions": 2}}
    assert environment["TENANTQ_WORKER__CONCURRENCY"] == "16"
    default = worker_environment(run_settings(base, "pre", "q", True), "q", {})
    assert json.loads(default["TENANTQ_QUEUES"]) == {"q": {}}
    assert "TENANTQ_WORKER__CONCURRENCY" not in default
