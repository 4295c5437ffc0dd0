"""The throwaway topics of one benchmark run: a fresh topic prefix, one queue, and its topics
created on entry and deleted on exit (unless kept for a look afterwards)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import tenantq
from tenantq.settings import QueueSettings
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics


@contextlib.contextmanager
def bench_settings(
    prefix_stem: str, queue: str, partitions: int, *, keep_topics: bool, **fields: Any
) -> Iterator[tenantq.Settings]:
    """``TENANTQ_*`` settings with a prefix of their own (``prefix_stem`` + 8 hex digits), the
    only queue ``queue`` and no metrics endpoint; ``fields`` override further settings."""
    settings = tenantq.load_settings().model_copy(
        update={
            "topic_prefix": f"{prefix_stem}{uuid.uuid4().hex[:8]}",
            "queues": {queue: QueueSettings(partitions=partitions)},
            "metrics_port": 0,
            **fields,
        }
    )
    ensure_topics(settings)
    try:
        yield settings
    finally:
        if not keep_topics:
            delete_topics(settings, [spec.name for spec in declared_topics(settings)])
