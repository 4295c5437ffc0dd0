"""Job ids: UUIDv7 (RFC 9562), time-ordered to the millisecond, 74 random bits."""

from __future__ import annotations

import os
import time
import uuid

_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RAND_A_SHIFT = 64
_RAND_B_MASK = (1 << 62) - 1


def new_job_id() -> uuid.UUID:
    """A fresh UUIDv7. Faster than ``uuid6.uuid7`` (which keeps a process-wide counter for
    sub-millisecond monotonicity that job ids do not need), and safe across ``fork``."""
    random = int.from_bytes(os.urandom(10))
    rand_a = random >> 68  # 12 bits
    rand_b = random & _RAND_B_MASK  # 62 bits
    millis = time.time_ns() // 1_000_000
    return uuid.UUID(int=(millis << 80) | _VERSION_AND_VARIANT | (rand_a << _RAND_A_SHIFT) | rand_b)
