"""Header values of dead letters: parsed without raising, bounded, and shown escaped."""

from __future__ import annotations

import datetime as dt

import pytest

from tenantq.dlq.header_values import (
    LATEST_MS,
    Problem,
    integer,
    millisecond_time,
    name,
    printable,
    time_of_ms,
)


def test_times_in_milliseconds_span_1970_to_the_end_of_9999() -> None:
    assert millisecond_time(b"0") == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert millisecond_time(str(LATEST_MS).encode()) == dt.datetime.max.replace(
        microsecond=999_000, tzinfo=dt.UTC
    )
    for outside in (b"-1", str(LATEST_MS + 1).encode(), b"1796609536579000"):
        assert isinstance(millisecond_time(outside), Problem)
    assert time_of_ms(LATEST_MS + 1) is None and time_of_ms(-1) is None and time_of_ms(None) is None


@pytest.mark.parametrize("written", [b"", b" 1", b"1 ", b"+1", b"1_0", b"0x1", b"1.0", b"9" * 21])
def test_integers_are_ascii_decimals_and_nothing_else(written: bytes) -> None:
    assert isinstance(integer(written, -(10**30), 10**30), Problem)


def test_integers_in_range() -> None:
    assert integer(b"-7", -10, 10) == -7
    found = integer(b"11", -10, 10)
    assert isinstance(found, Problem) and found.reason == "11 is out of range (-10 to 10)"


def test_names_are_printable_utf8() -> None:
    assert name("Ünïcode.Error".encode()) == "Ünïcode.Error"
    for bad in (b"a\nb", b"\xc3", b"a\xe2\x80\xaeb", b"\x1b[31m"):  # newline, cut, RTL override
        assert isinstance(name(bad), Problem)


def test_printable_escapes_what_a_terminal_would_obey() -> None:
    assert printable(b"ok \xe6\xbc\xa2") == "ok 漢"
    assert printable("\x1b]0;title\x07\u202e") == "\\x1b]0;title\\x07\\u202e"
    assert printable(None) == "(none)"
    assert printable("x" * 10, 4) == "xxxx… (10 characters in all)"
