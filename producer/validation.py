"""Checks of an enqueue request, run before anything reaches Kafka.

Each check raises an ``InvalidJobError`` subclass whose message names the offending argument,
so bad input is a clear error at the call site rather than a dead job later.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from tenantq.app import JOB_TYPE_PATTERN
from tenantq.errors import InvalidJobError, PayloadValidationError
from tenantq.settings import seconds_of

#: Scheduling further ahead than this is almost surely a unit mistake (ms for s, year 9999).
MAX_SCHEDULE_AHEAD = dt.timedelta(days=366)
MAX_ATTEMPTS_LIMIT = 1000
IDEMPOTENCY_KEY_MAX_LENGTH = 256
TRACE_CONTEXT_MAX_ENTRIES = 32
TRACE_CONTEXT_MAX_CHARS = 1024

_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _reusable_c_encoder() -> Callable[[object, int], list[str]] | None:
    """The payload JSON fast path, in this one place: the C encoder that
    ``JSONEncoder.encode`` builds afresh for every call (``json.encoder.c_make_encoder``,
    undocumented, which typeshed does not declare), built once with ``_JSON_ENCODER``'s
    options. ``encoder(value, 0)`` is the list of chunks whose join is
    ``_JSON_ENCODER.encode(value)`` for a value that is not a string, raising as it does
    (but for a cyclic value: without circular-reference markers it ends in
    ``RecursionError``, which the callers catch too). Building the encoder per call would
    cost a third of a plain job's preparation (``prepare_all``).

    None (and ``encode_json`` takes the public path) where the interpreter has no such
    encoder or builds it differently; a unit test compares both paths with ``json.dumps``.
    """
    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if make_encoder is None:
        return None
    try:
        encoder: Callable[[object, int], list[str]] = make_encoder(
            None,
            _JSON_ENCODER.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            False,
            False,
            False,
        )  # fmt: skip
        if "".join(encoder({"a": [1, 2.5, None, True, "é"]}, 0)) != ('{"a":[1,2.5,null,true,"é"]}'):
            return None
    except (TypeError, ValueError):
        return None
    return encoder


#: ``_reusable_c_encoder()``: the producer's batch loop calls it directly.
C_ENCODER = _reusable_c_encoder()


def encode_json(value: object) -> str:
    """Compact UTF-8 JSON, refusing NaN and infinities (they are not JSON)."""
    if C_ENCODER is None:
        return _JSON_ENCODER.encode(value)
    if isinstance(value, str):
        return json.encoder.encode_basestring(value)
    return "".join(C_ENCODER(value, 0))


def check_job_type_name(name: object) -> str:
    # fullmatch: the pattern's ``$`` alone would also let a trailing newline through.
    if not isinstance(name, str) or not JOB_TYPE_PATTERN.fullmatch(name):
        raise InvalidJobError(f"job type {name!r} must match {JOB_TYPE_PATTERN.pattern}")
    return name


class EncodedPayload(bytes):
    """A payload that is already UTF-8 JSON text, sent byte for byte: the outbox relay's for a
    job ``tenantq_enqueue`` wrote in SQL, whose row holds these bytes and their hash. Only its
    size is checked; the worker validates it against the job type's model."""

    __slots__ = ()


def encode_payload(
    job_type: str, payload: object, model: type[BaseModel] | None, max_payload_bytes: int
) -> bytes:
    """The payload as UTF-8 JSON, validated by ``model`` when there is one.

    With a model, what is sent is the model's own JSON dump, so the worker sees exactly what
    passed validation (defaults filled, aliases kept).
    """
    if type(payload) is EncodedPayload:
        encoded = bytes(payload)
    elif model is not None:
        try:
            validated = payload if isinstance(payload, model) else model.model_validate(payload)
        except ValidationError as error:
            raise PayloadValidationError(
                f"payload of {job_type!r} does not fit {model.__name__}: {_describe(error)}"
            ) from None
        encoded = validated.model_dump_json(by_alias=True).encode()
    else:
        if isinstance(payload, BaseModel):
            encoded = payload.model_dump_json(by_alias=True).encode()
        else:
            try:
                text = encode_json(payload)
            except (TypeError, ValueError, RecursionError) as error:
                raise PayloadValidationError(
                    f"payload of {job_type!r} is not JSON-serialisable: {error}"
                ) from None
            encoded = text.encode()
    if len(encoded) > max_payload_bytes:
        raise InvalidJobError(
            f"payload of {job_type!r} is {len(encoded)} bytes encoded, "
            f"the limit (max_payload_bytes) is {max_payload_bytes}"
        )
    return encoded


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        location = ".".join(str(part) for part in item["loc"]) or "(payload)"
        parts.append(f"{location}: {item['msg']}")
    more = error.error_count() - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def resolve_due_time(run_after: object, delay: object, now: dt.datetime) -> dt.datetime | None:
    """When the job may run: None for now, else an aware UTC time at most a year ahead."""
    if run_after is not None and delay is not None:
        raise InvalidJobError("give run_after or delay, not both")
    if delay is not None:
        seconds = seconds_of(delay)
        if seconds is None:
            raise InvalidJobError(f"delay must be seconds or a timedelta, got {delay!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidJobError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
        if seconds > MAX_SCHEDULE_AHEAD.total_seconds():
            raise InvalidJobError(
                f"delay of {seconds:.0f} s is more than {MAX_SCHEDULE_AHEAD.days} days ahead"
            )
        return now + dt.timedelta(seconds=seconds) if seconds > 0 else None
    if run_after is None:
        return None
    if not isinstance(run_after, dt.datetime):
        raise InvalidJobError(f"run_after must be a datetime, got {type(run_after).__name__}")
    if run_after.tzinfo is None or run_after.utcoffset() is None:
        raise InvalidJobError(
            f"run_after {run_after.isoformat()} has no time zone; pass an aware datetime"
        )
    if run_after - now > MAX_SCHEDULE_AHEAD:
        raise InvalidJobError(
            f"run_after {run_after.isoformat()} is more than {MAX_SCHEDULE_AHEAD.days} days ahead"
        )
    return run_after.astimezone(dt.UTC) if run_after > now else None


def check_max_attempts(max_attempts: object) -> int | None:
    if max_attempts is None:
        return None
    if (
        not isinstance(max_attempts, int)
        or isinstance(max_attempts, bool)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    ):
        raise InvalidJobError(
            f"max_attempts must be an integer in 1..{MAX_ATTEMPTS_LIMIT}, got {max_attempts!r}"
        )
    return max_attempts


def check_idempotency_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
        raise InvalidJobError(
            f"idempotency_key must be a string of 1..{IDEMPOTENCY_KEY_MAX_LENGTH} characters"
        )
    return key


def check_job_id(job_id: object) -> uuid.UUID | None:
    if job_id is None or isinstance(job_id, uuid.UUID):
        return job_id
    if isinstance(job_id, str):
        try:
            return uuid.UUID(job_id)
        except ValueError:
            pass
    raise InvalidJobError(f"job_id must be a UUID, got {job_id!r}")


def check_trace_context(trace_context: object) -> dict[str, str]:
    if trace_context is None:
        return {}
    if not isinstance(trace_context, Mapping):
        raise InvalidJobError("trace_context must be a mapping of strings to strings")
    if len(trace_context) > TRACE_CONTEXT_MAX_ENTRIES:
        raise InvalidJobError(f"trace_context has more than {TRACE_CONTEXT_MAX_ENTRIES} entries")
    result: dict[str, str] = {}
    for key, value in trace_context.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidJobError(f"trace_context entry {key!r} must map a string to a string")
        if len(key) + len(value) > TRACE_CONTEXT_MAX_CHARS:
            raise InvalidJobError(f"trace_context entry {key!r} is too long")
        result[key] = value
    return result


def check_keyword_names(values: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise InvalidJobError(f"unknown enqueue argument(s): {', '.join(unknown)}")
