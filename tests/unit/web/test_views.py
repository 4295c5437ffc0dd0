"""Formatting helpers of the console: ages, counts, sparklines and bars made only of numbers
and escaped labels, payloads shown as text."""

from __future__ import annotations

from tenantq.web.views import bar, format_age, format_count, pretty_payload, sparkline


def test_format_age_and_count() -> None:
    assert [format_age(v) for v in (None, 0.25, 42, 425, 11_520, 400_000)] == [
        "-",
        "250ms",
        "42s",
        "7m05s",
        "3h12m",
        "4d",
    ]
    assert format_count(None) == "-"
    assert format_count(1234567) == "1\u2009234\u2009567"
    assert format_count(2.5) == "2.5"


def test_sparkline_scales_to_its_maximum_and_escapes_its_label() -> None:
    svg = str(sparkline([0, None, 5, 10], label='<b>"q"</b>'))
    assert svg.startswith("<svg") and "<polyline" in svg
    assert "&lt;b&gt;" in svg and "<b>" not in svg
    points = svg.split('points="')[1].split('"')[0].split()
    assert len(points) == 4
    assert float(points[-1].split(",")[1]) == 2.0  # the maximum touches the top margin
    assert str(sparkline([])) == ""


def test_bar_is_clamped() -> None:
    assert 'width="160.0"' in str(bar(5, 1))
    assert 'class="fill" width="0.0"' in str(bar(None, 1))


def test_payloads_are_pretty_json_or_text() -> None:
    assert pretty_payload(b'{"b":1,"a":"<script>"}') == '{\n  "a": "<script>",\n  "b": 1\n}'
    assert pretty_payload(b"not json") == "not json"
    assert pretty_payload(b"\xff\x00") == "hex:ff00"
    assert pretty_payload(None) == ""
