"""The throwaway topics of one benchmark run: a fresh topic prefix, one queue, and its topics
created on entry and deleted on exit (unless kept for a look afterwards)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

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


class Batch(Protocol):
    """What a client's read returns: a list of messages, or a share consumer's ``Messages``."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...


def reading_rate(
    fetch: Callable[[], Batch], close: Callable[[], None], count: int, seconds: float
) -> float:
    """Messages/s of a bare client whose ``fetch`` returns the next messages it has read, from
    its first message to its ``count``-th (0.0 when ``count`` are not read within
    ``seconds``); ``close`` is called in any case."""
    seen, first = 0, None
    deadline = time.monotonic() + seconds
    try:
        while seen < count and time.monotonic() < deadline:
            messages = fetch()
            if len(messages) and first is None:
                first = time.perf_counter()
            seen += sum(1 for message in messages if message.error() is None)
        elapsed = time.perf_counter() - (first or time.perf_counter())
    finally:
        close()
    return seen / elapsed if seen >= count and elapsed > 0 else 0.0
