"""``RequestPreparer``: the batch preparation fast path publishes byte for byte what the
generic path does."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

from fakes import FakeKafkaProducer, make_settings
from tenantq import headers as header_names
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.store.placement import PlacementRecord


def test_batch_fast_path_publishes_what_the_generic_path_does(tmp_path: Path) -> None:
    rows = [PlacementRecord("default", "spready", "spread", 4, ())]
    with Producer(
        make_settings(tmp_path),
        placement_book=PlacementBook(lambda queue: rows, 5.0),
        kafka_client=FakeKafkaProducer(),
    ) as made:
        preparer = made._preparer
        now = dt.datetime.now(dt.UTC)
        mixed: list[Any] = [
            EnqueueRequest("resize", "acme", {"a": [1, "é"]}, job_id=uuid.uuid4()),
            EnqueueRequest("resize", "spready", {"n": 2}, job_id=str(uuid.uuid4())),
            {"job_type": "resize", "tenant": "acme", "payload": None, "job_id": uuid.uuid4()},
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), delay=30),
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), max_attempts=2),
        ]
        batched = preparer.prepare_all(mixed, now)
        one_by_one = [preparer.prepare(request, now) for request in mixed]
        assert batched == one_by_one
        assert batched[3].topic.startswith("unit.default.retry.")
        assert dict(batched[3].extra_headers)[header_names.DELAY_REASON] == "scheduled"
