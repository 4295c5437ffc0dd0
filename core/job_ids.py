"""Job ids: UUIDv7 (RFC 9562), time-ordered to the millisecond, 74 random bits."""

from __future__ import annotations

import os
import time
import uuid

_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RAND_A_SHIFT = 64
_RAND_B_MASK = (1 << 62) - 1
_RANDOM_BYTES = 10

_UUID = uuid.UUID
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown
_new_object = object.__new__
# ``UUID`` is immutable (its ``__setattr__`` refuses): its own constructor sets its two slots
# through ``object.__setattr__``; their descriptors do the same, without the name lookup.
_set_int = _UUID.__dict__["int"].__set__
_set_is_safe = _UUID.__dict__["is_safe"].__set__


def new_job_id() -> uuid.UUID:
    """A fresh UUIDv7. Faster than ``uuid6.uuid7`` (which keeps a process-wide counter for
    sub-millisecond monotonicity that job ids do not need), and safe across ``fork``."""
    return uuid.UUID(int=new_job_id_ints(1)[0])


def uuid_of_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for a ``value`` known to fit 128 bits (a job id read or
    made by tenantq), without the range check and keyword handling of ``UUID.__init__``:
    half its cost, paid once per job by the producer's futures and the worker's intake. A
    unit test pins the ``UUID`` attributes this relies on."""
    made = _new_object(_UUID)
    _set_int(made, value)
    _set_is_safe(made, _UNKNOWN_SAFETY)
    return made


def new_job_id_ints(count: int) -> list[int]:
    """``count`` fresh UUIDv7s, as the 128-bit integers, from one clock read and one
    ``os.urandom`` call.

    A syscall per id was a visible share of the producer's per-job cost, and it releases the
    GIL to the delivery thread every time. Nothing is buffered between calls, so a forked
    child never repeats its parent's ids. Integers, not ``UUID`` objects: the cyclic GC
    tracks every ``UUID`` but no ``int``, and the producer only needs the objects for the
    ``JobRef`` it returns.
    """
    random = os.urandom(_RANDOM_BYTES * count)
    base = ((time.time_ns() // 1_000_000) << 80) | _VERSION_AND_VARIANT
    from_bytes = int.from_bytes
    ids: list[int] = []
    append = ids.append
    for start in range(0, _RANDOM_BYTES * count, _RANDOM_BYTES):
        bits = from_bytes(random[start : start + _RANDOM_BYTES])
        # 12 bits of rand_a above the variant, 62 bits of rand_b below it.
        append(base | ((bits >> 68) << _RAND_A_SHIFT) | (bits & _RAND_B_MASK))
    return ids


def job_id_text(value: int) -> str:
    """``str(uuid.UUID(int=value))`` without making the ``UUID``."""
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
