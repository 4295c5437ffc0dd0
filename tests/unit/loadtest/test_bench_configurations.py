"""The throughput benchmark's tenantq configurations, as ``--tenantq`` spells them: what each
letter turns on, and labels and log names that tell the configurations apart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from bench_tenantq import TenantqConfig  # noqa: E402

from tenantq.settings import WorkerSettings  # noqa: E402


def test_each_spelling_turns_on_what_it_says() -> None:
    assert TenantqConfig.parse("default") == TenantqConfig(None, None)
    assert TenantqConfig.parse("512x2") == TenantqConfig(512, 2)
    assert TenantqConfig.parse("512x2t") == TenantqConfig(512, 2, threads=True)
    assert TenantqConfig.parse("512x2a") == TenantqConfig(512, 2, asynchronous=True)
    assert TenantqConfig.parse("2048x2ta") == TenantqConfig(
        2048, 2, threads=True, asynchronous=True
    )
    assert TenantqConfig.parse("defaulto") == TenantqConfig(None, None, traced=True)
    assert TenantqConfig.parse("512x2tao") == TenantqConfig(
        512, 2, threads=True, asynchronous=True, traced=True
    )


def test_the_labels_tell_the_configurations_apart() -> None:
    defaults = WorkerSettings(concurrency=32, processes=2)
    labels = [
        TenantqConfig.parse(text).label(defaults)
        for text in ("default", "32x2", "32x1", "512x2", "512x2t", "512x2a", "512x2ta", "defaulto")
    ]
    assert labels == [
        "tenantq c32 p2 (defaults)",
        "tenantq c32 p2 (defaults)",
        "tenantq c32 p1",
        "tenantq c512 p2",
        "tenantq c512 p2 threads",
        "tenantq c512 p2, async handler",
        "tenantq c512 p2 threads, async handler",
        "tenantq c32 p2 (defaults), traced",
    ]
