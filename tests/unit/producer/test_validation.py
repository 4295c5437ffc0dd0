"""What the producer checks and encodes before Kafka, function by function; the same checks
seen through ``Producer.enqueue`` are in ``test_producer.py``."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from typing import Any

import pytest

from tenantq.producer import validation
from tenantq.producer.validation import encode_json


@pytest.mark.parametrize(
    "value", [{"a": 1, "b": [1, 2.5, None, True], "c": 'é"\n\u2028'}, [], "x", 3, None, {1: 2}]
)
def test_payload_json_is_compact_standard_json(value: Any) -> None:
    assert encode_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def random_json(generator: random.Random, depth: int = 0) -> Any:
    """A random JSON value: every kind, unicode and escapes, big and negative numbers,
    floats whose text takes an exponent, keys that are not strings (JSON makes them so)."""
    kinds = ["int", "float", "text", "bool", "none"] + (["list", "dict"] * 2 if depth < 4 else [])
    kind = generator.choice(kinds)
    if kind == "int":
        return generator.choice([0, -1, 2**63, -(10**30), generator.randrange(-(10**6), 10**6)])
    if kind == "float":
        return generator.choice([0.5, -0.0, 1e-7, 1e16, 1.5e300, 2.2250738585072014e-308])
    if kind == "text":
        return "".join(generator.choice('aé漢🙂"\\\n\t\x00\x1f\u2028/') for _ in range(8))
    if kind == "bool":
        return generator.random() < 0.5
    if kind == "none":
        return None
    if kind == "list":
        return [random_json(generator, depth + 1) for _ in range(generator.randrange(4))]
    keys: list[Any] = ["k", "é", "", "🙂", 7, 2.5, True, None]
    return {generator.choice(keys): random_json(generator, depth + 1) for _ in range(3)}


def outcome_of(encode: Any, value: Any) -> Any:
    try:
        return encode(value)
    except (TypeError, ValueError, RecursionError) as error:
        return type(error)


@pytest.mark.parametrize("fast", [True, False], ids=["c-encoder", "public-path"])
def test_encode_json_is_json_dumps(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The differential test of the reused C encoder (``validation.C_ENCODER``), and of the
    public path taken without it: the same text as ``json.dumps`` with the same options for
    many random values, and an error where it has one (NaN, infinities, types JSON does not
    have). A cyclic value is refused by both (``json.dumps`` names the cycle, the reused
    encoder, without markers, runs out of recursion: the producer catches both)."""
    if fast:
        assert validation.C_ENCODER is not None  # CPython builds the C encoder
    else:
        monkeypatch.setattr(validation, "C_ENCODER", None)

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    generator = random.Random(41)
    values: list[Any] = [random_json(generator) for _ in range(2000)]
    values += [float("nan"), {"x": float("inf")}, [dt.datetime(2026, 1, 1)], {("a",): 1}]
    values += [b"bytes", {1, 2}, uuid.uuid4(), "only a string", ""]
    for value in values:
        assert outcome_of(encode_json, value) == outcome_of(dumps, value)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises((ValueError, RecursionError)):
        encode_json(cyclic)


def test_a_job_type_name_with_a_trailing_newline_is_refused() -> None:
    """The pattern's ``$`` matches before a final newline; the name must match whole."""
    assert validation.check_job_type_name("send_email") == "send_email"
    with pytest.raises(validation.InvalidJobError, match="must match"):
        validation.check_job_type_name("send_email\n")


def test_an_encoded_payload_travels_byte_for_byte_and_only_its_size_is_checked() -> None:
    """The relay's payloads written in SQL: the bytes the job row holds and hashed, even where
    a model would dump them otherwise (the worker validates them)."""
    from pydantic import BaseModel

    class Order(BaseModel):
        order: int

    text = validation.EncodedPayload(b'{"order": 1.0, "extra": "\xc3\xa9"}')
    assert validation.encode_payload("receipt", text, Order, 100) == bytes(text)
    assert validation.encode_payload("receipt", text, None, 100) == bytes(text)
    with pytest.raises(validation.InvalidJobError, match="is 29 bytes encoded"):
        validation.encode_payload("receipt", text, None, 28)
