"""Fuzz: whatever anyone writes to a DLQ topic, the reader yields a ``DeadLetter`` and never
raises; a record is replayable only when every header tenantq reads parses and its body is an
envelope; and what the tools print of it (JSON, tables at a terminal, the filter) never fails
and never carries a control character to the terminal.

The records mix what the worker writes with what it never would: numbers out of range (a
dead-at time of -99999999999999999 or in microseconds), text that is not UTF-8 or holds
control characters and ``rich`` markup, bodies that are envelopes, almost envelopes, or noise.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tenantq import headers
from tenantq.dlq import output
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.dlq.header_values import PARSERS, Problem
from tenantq.dlq.reader import INTERNAL_FAILURE, _decode
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay import ReplayOutcome, ReplayReport
from tenantq.schemas.envelope import Envelope, encode_envelope

TOPIC = "t.default.dlq"
MAX_BYTES = 100_000
FUZZ = settings(
    max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
#: What must never reach a terminal from a record: C0/C1 controls but the newline, DEL.
TERMINAL_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")

nasty_text = st.lists(
    st.sampled_from(
        [
            "a",
            "Z",
            "0",
            " ",
            "[/]",
            "[bold]",
            "\n",
            "\x1b[31m",
            "\x00",
            "\u202e",
            "é",
            "漢",
            "<b>",
            "\x85",
            "\t",
            "\u2028",
        ]
    ),  # fmt: skip
    max_size=8,
).map("".join)
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([-99999999999999999, 1796609536579000, 253402300799999, 253402300800000]),
).map(lambda number: str(number).encode())
header_values = st.one_of(
    numbers,
    st.uuids().map(lambda value: str(value).encode()),
    st.binary(max_size=40),
    nasty_text.map(str.encode),
    st.just(b"Undecodable:corrupt"),
    st.sampled_from([b" 12", b"1_000", b"\xd9\xa1", b"+5", b"0x10", b"1e3"]),
)
header_names = st.one_of(st.sampled_from(sorted(PARSERS)), st.text(max_size=20))
envelopes = st.builds(
    Envelope,
    job_id=st.uuids(),
    queue=st.just("default"),
    job_type=st.text(max_size=20),
    tenant_id=st.text(max_size=20),
    partition_key=st.text(max_size=20),
    payload=st.one_of(st.binary(max_size=50), st.just(b"[" * 1_200), st.just(b'{"a": 1}')),
    created_at=st.datetimes(
        min_value=dt.datetime(1, 1, 1),
        max_value=dt.datetime(9999, 12, 31),
        timezones=st.just(dt.UTC),
    ),
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["none", "noise", "envelope", "cut"]))
    if kind == "none":
        return None
    if kind == "noise":
        return draw(st.binary(max_size=100))
    data = encode_envelope(draw(envelopes))
    return data if kind == "envelope" else data[: draw(st.integers(0, len(data)))]


class RawRecord:
    """What ``confluent_kafka.Message`` gives the reader, from arbitrary parts."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def timestamp(self) -> tuple[int, int]:
        stamp = self.record["timestamp"]
        return (0, -1) if stamp is None else (1, stamp)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        if self.record.get("headers_fail"):  # a header name that is not UTF-8
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return self.record["headers"]

    def key(self) -> bytes | None:
        return self.record["key"]  # type: ignore[no-any-return]

    def value(self) -> bytes | None:
        return self.record["value"]  # type: ignore[no-any-return]


records = st.fixed_dictionaries(
    {
        "timestamp": st.none() | st.integers(-(2**63), 2**63 - 1),
        "headers": st.none()
        | st.lists(st.tuples(header_names, st.none() | header_values), max_size=12),
        "key": st.none() | st.binary(max_size=20),
        "value": bodies(),
    }
)


def read(record: dict[str, Any]) -> DeadLetter:
    return _decode(RawRecord(record), TOPIC, 3, 17, MAX_BYTES)


@FUZZ
@given(record=records)
def test_no_record_raises_out_of_the_reader(record: dict[str, Any]) -> None:
    letter = read(record)
    # Read by the parsers, not by the reader's last resort for its own bugs.
    assert not (letter.unreadable_reason or "").startswith(INTERNAL_FAILURE)
    assert (letter.topic, letter.dlq_partition, letter.dlq_offset) == (TOPIC, 3, 17)
    present = {name: value for name, value in record["headers"] or () if value is not None}
    broken = [name for name, value in present.items() if name in PARSERS]
    broken = [name for name in broken if isinstance(PARSERS[name](present[name]), Problem)]
    if broken:
        assert letter.unreadable and all(
            name in (letter.unreadable_reason or "") for name in broken
        )
    if letter.replayable:
        assert letter.envelope is not None and not broken
    if letter.unreadable:
        assert not letter.replayable


@settings(FUZZ, max_examples=60)  # rendering tables costs ~10 ms a record
@given(record=records)
def test_what_the_tools_show_of_any_record_never_fails(record: dict[str, Any]) -> None:
    letter = read(record)
    json.loads(json.dumps(letter.as_dict()))
    json.loads(json.dumps(letter.as_dict(full=True), default=str))
    for name, value in letter.raw_headers():
        assert name.isprintable() and value.isprintable()
    where = DeadLetterFilter.parse(since="1d", tenants=["acme"], error_classes=["Undecodable"])
    where.matches(letter)
    report = ReplayReport(dry_run=True, matched=1)
    report.add(ReplayOutcome(letter, "skipped", letter.skip_reason or "job is dead"))

    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None, force_terminal=False)
    console.print(output.letters_table([letter], "DLQ"))
    output.show_letter(console, letter, None)
    output.replay_summary(console, report, 1)
    printed = screen.getvalue()
    assert TERMINAL_CONTROL.search(printed) is None, printed


def test_the_strategies_reach_the_cases_that_matter() -> None:
    # The fuzz above is only as good as its records: both kinds of bad letter, and good ones.
    good = read(
        {
            "timestamp": 1_796_609_536_579,
            "headers": [(headers.ERROR_CLASS, b"PermanentError")],
            "key": b"acme",
            "value": encode_envelope(
                Envelope(
                    uuid.uuid4(), "default", "mail", "acme", "acme", b"{}", dt.datetime.now(dt.UTC)
                )
            ),
        }
    )
    assert good.replayable
    microseconds = read(
        {
            "timestamp": None,
            "headers": [(headers.DEAD_AT_MS, b"1796609536579000")],
            "key": None,
            "value": b"noise",
        }
    )
    assert microseconds.unreadable and microseconds.dead_at is None
    nameless = read(
        {"timestamp": 5, "headers": [], "headers_fail": True, "key": None, "value": None}
    )
    assert nameless.unreadable and INTERNAL_FAILURE in (nameless.unreadable_reason or "")
