"""Random envelope records (field name to value) for the codec tests: every kind of text the
fields may carry, sizes from empty to 20 kB, times from 1960 to 5100."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any


def random_text(generator: random.Random, limit: int) -> str:
    alphabet = "abcXYZ09._:-#é漢🙂"
    return "".join(generator.choice(alphabet) for _ in range(generator.randrange(limit)))


def random_head(generator: random.Random) -> dict[str, Any]:
    """The fields up to ``created_at``; the caller adds the rest."""
    return {
        "job_id": str(uuid.UUID(int=generator.getrandbits(128))),
        "queue": random_text(generator, 20) or "q",
        "job_type": random_text(generator, 40),
        "tenant_id": random_text(generator, 130),
        "partition_key": random_text(generator, 140),
        "payload": random_text(generator, 20000 if generator.random() < 0.05 else 300).encode(),
        "created_at": dt.datetime(1960, 1, 1, tzinfo=dt.UTC)
        + dt.timedelta(microseconds=generator.randrange(0, 10**17)),
    }


def unset_tail() -> dict[str, Any]:
    """The fields after ``created_at``, each at its unset value (a new dict every call)."""
    return {
        "run_after": None,
        "max_attempts": None,
        "idempotency_key": None,
        "trace_context": {},
        "replay_count": 0,
        "attributes": {},
    }
