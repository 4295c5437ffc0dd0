"""What the producer checks and encodes before Kafka, function by function; the same checks
seen through ``Producer.enqueue`` are in ``test_producer.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenantq.producer.validation import encode_json


@pytest.mark.parametrize(
    "value", [{"a": 1, "b": [1, 2.5, None, True], "c": 'é"\n\u2028'}, [], "x", 3, None, {1: 2}]
)
def test_payload_json_is_compact_standard_json(value: Any) -> None:
    assert encode_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
