"""Job ids: UUIDv7 (RFC 9562), time-ordered to the millisecond, 74 random bits."""

from __future__ import annotations

import binascii
import os
import struct
import time
import uuid
from collections.abc import Sequence

_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RAND_A_SHIFT = 64
_RAND_B_MASK = (1 << 62) - 1
_RANDOM_BYTES = 10
#: Byte 6 of a UUIDv7 from a random byte: the version (7) above its 4 low bits; byte 8:
#: the variant (0b10) above its 6 low bits.
_AS_VERSION_7 = bytes(0x70 | (value & 0x0F) for value in range(256))
_AS_VARIANT = bytes(0x80 | (value & 0x3F) for value in range(256))
_TEXT_LENGTH = 36
#: (character of the text, hex digit of the id) of the random digits that a dash shifts.
_SHIFTED_DIGITS = ((15, 13), (16, 14), (17, 15), (19, 16), (20, 17), (21, 18), (22, 19))
#: From this many ids on, they are made with whole-buffer operations (``_fresh_id_bytes``),
#: whose fixed cost a few ids do not repay.
_BULK_MIN = 16

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
    if count >= _BULK_MIN:
        return _ints_of(_fresh_id_bytes(count), count)
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


def new_job_id_block(count: int) -> tuple[list[int], Sequence[bytes]]:
    """``count`` fresh UUIDv7s as ``new_job_id_ints`` makes them, with their text: the
    integers, and the ASCII of each id's standard form (``job_id_text``).

    The producer writes each id's text into its envelope and a header. Made for the whole
    batch by the buffer operations below, integers and text cost less than a fifth of the
    per-id loop and ``job_id_text``. A unit test compares the result with theirs.
    """
    if count < _BULK_MIN:
        ints = new_job_id_ints(count)
        return ints, [job_id_text(value).encode() for value in ints]
    blob = _fresh_id_bytes(count)
    ints = _ints_of(blob, count)
    digits = memoryview(binascii.hexlify(blob))
    # The first 13 digits are the batch's millisecond and the version, the same for every
    # id: a template holds them and the dashes, and only the random digits are copied in.
    first = digits[:13].tobytes()
    template = first[:8] + b"-" + first[8:12] + b"-" + first[12:] + b"000-0000-000000000000"
    text = bytearray(template) * count
    view = memoryview(text)
    # Strided copies, one digit position of every id at a time: the text's characters
    # 15-17 and 19-22 are the digits 13-19 ...
    for position, digit in _SHIFTED_DIGITS:
        view[position::_TEXT_LENGTH] = digits[digit::32]
    # ... and its last 12 characters the last 12 digits, 4-byte aligned in both.
    words, digit_words = view.cast("I"), digits.cast("I")
    for word in (6, 7, 8):
        words[word::9] = digit_words[word - 1 :: 8]
    words.release()
    view.release()
    return ints, _pieces(text, _TEXT_LENGTH, count)


def _fresh_id_bytes(count: int) -> bytes:
    """``count`` UUIDv7s, 16 big-endian bytes each: one ``os.urandom`` call, then the time
    and the version and variant bits written into every id at once by strided buffer
    operations, at about a third of the per-id loop's cost with the integers taken out
    (``_ints_of``); the loop stays for a few ids, where the operations' fixed cost is more
    than they save."""
    ids = bytearray(os.urandom(16 * count))
    millis = (time.time_ns() // 1_000_000).to_bytes(6)
    # Bytes 0-5: the millisecond, as one 4-byte and one 2-byte unit per id.
    words, halves = memoryview(ids).cast("I"), memoryview(ids).cast("H")
    words[0::4] = memoryview(millis[:4] * count).cast("I")
    halves[2::8] = memoryview(millis[4:] * count).cast("H")
    # Byte 6: version 7 above 4 random bits; byte 8: variant 0b10 above 6 random bits.
    ids[6::16] = ids[6::16].translate(_AS_VERSION_7)
    ids[8::16] = ids[8::16].translate(_AS_VARIANT)
    words.release()
    halves.release()
    return bytes(ids)


def _ints_of(blob: bytes, count: int) -> list[int]:
    # Split and converted in C (struct, map): half the cost of a comprehension of
    # from_bytes over slices.
    return list(map(int.from_bytes, _pieces(blob, 16, count)))


def _pieces(buffer: bytes | bytearray, size: int, count: int) -> tuple[bytes, ...]:
    """``buffer`` cut into ``count`` pieces of ``size`` bytes. A ``Struct`` of its own,
    not ``struct.unpack``, whose cache would keep one large format per batch size."""
    pieces: tuple[bytes, ...] = struct.Struct(f"{size}s" * count).unpack(buffer)
    return pieces


def job_id_text(value: int) -> str:
    """``str(uuid.UUID(int=value))`` without making the ``UUID``."""
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
