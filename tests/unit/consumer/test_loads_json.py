"""``loads_json`` reads a job's JSON payload as ``json.loads`` does: the same value, or the
same error, for every input, whether or not it takes the scanner's direct path."""

from __future__ import annotations

import codecs
import json
import random

import pytest

from tenantq.consumer.runner import loads_json

CASES = [
    b"{}",
    b'{"user": 12345, "note": "' + b"x" * 64 + b'"}',
    b'{"a": [1, 2.5, -3e10, true, false, null], "b": {"c": "\\u00e9 \\ud83d\\ude00"}}',
    '{"name": "é ✓ 日本"}'.encode(),
    b'{"lone": "\\ud800"}',
    '{"raw": "\ud800"}'.encode("utf-8", "surrogatepass"),
    b" {}",
    b"{} ",
    b"{}\n",
    b"{} {}",
    b"{",
    b"{}x",
    b'{"a": NaN, "b": Infinity}',
    b'{"a": 1,}',
    b"[]",
    b"[1, 2]",
    b'"text"',
    b"12",
    b"",
    b"{\x00}",
    codecs.BOM_UTF8 + b"{}",
    "{}".encode("utf-16-le"),
    "{}".encode("utf-16"),
    '{"k": 1}'.encode("utf-32-le"),
    b'{"a": "\xff"}',
    b'{"a": "' + b"\xc3" + b'"}',
    b'{"deep": ' + b"[" * 50 + b"]" * 50 + b"}",
]


def outcome(function: object, payload: bytes) -> tuple[str, object]:
    try:
        return "value", function(payload)  # type: ignore[operator]
    except Exception as error:  # noqa: BLE001 - the comparison is the point
        return "error", (type(error), str(error))


@pytest.mark.parametrize("payload", CASES)
def test_every_case_reads_as_json_loads_reads_it(payload: bytes) -> None:
    assert outcome(loads_json, payload) == outcome(json.loads, payload)


def test_mutated_payloads_read_as_json_loads_reads_them() -> None:
    """Random byte edits of valid payloads (fixed seed): the direct path and ``json.loads``
    agree on every one, value or error."""
    draw = random.Random(20261206)
    seeds = [case for case in CASES if outcome(json.loads, case)[0] == "value"]
    for _ in range(5_000):
        data = bytearray(draw.choice(seeds))
        for _ in range(draw.randint(1, 3)):
            if data and draw.random() < 0.5:
                data[draw.randrange(len(data))] = draw.randrange(256)
            else:
                data.insert(draw.randint(0, len(data)), draw.choice(b' {}[]":,\\0\x00\xc3e'))
        payload = bytes(data)
        assert outcome(loads_json, payload) == outcome(json.loads, payload), payload
