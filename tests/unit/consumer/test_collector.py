"""settle_collector: what a worker process keeps for its life is frozen out of the cyclic
collector, and the young generation is collected after 20,000 allocations, not 700."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tenantq.consumer.collector import YOUNG_GENERATION_THRESHOLD, settle_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_the_collector_is_settled() -> None:
    kept = [[index] for index in range(1_000)]  # containers alive at start, as a worker's
    settle_collector()
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD
    # Collections still happen: a cycle made after start is found and freed.
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1
