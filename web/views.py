"""Templates and the small formatting helpers they use: ages, counts, inline SVG sparklines
and bars, pretty payloads.

Jinja2 autoescaping is on for every template, so anything that comes from a job (payload,
error message, tenant id, header) is text on the page, never markup. The only ``Markup`` made
here is SVG built from numbers this module formats itself, plus escaped labels.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from tenantq.formatting import format_age as shared_format_age
from tenantq.store.placement import PlacementRecord

#: Size of a sparkline in CSS pixels.
SPARK_WIDTH = 120
SPARK_HEIGHT = 24


def format_age(seconds: float | None) -> str:
    """``format_age`` of the command line, in whole days from 48 hours on (``4d``)."""
    return shared_format_age(seconds, days=True)


def format_count(value: int | float | None) -> str:
    """Thousands separated with a thin space; ``-`` for unknown."""
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}".replace(",", "\u2009")
    return f"{int(value):,}".replace(",", "\u2009")


def format_time(value: dt.datetime | None) -> str:
    """UTC, to the second, without the date noise of ISO 8601's ``T`` and offset."""
    if value is None:
        return "-"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_percent(value: float | None) -> str:
    """A share as a whole percentage."""
    return "-" if value is None else f"{value * 100:.0f}%"


def sparkline(values: Sequence[float | int | None], label: str = "") -> Markup:
    """A polyline of ``values`` (None counts as 0) scaled to its own maximum."""
    points = [float(value or 0) for value in values]
    if not points:
        return Markup("")
    top = max(points) or 1.0
    step = SPARK_WIDTH / max(1, len(points) - 1)
    coordinates = " ".join(
        f"{index * step:.1f},{SPARK_HEIGHT - 2 - (value / top) * (SPARK_HEIGHT - 4):.1f}"
        for index, value in enumerate(points)
    )
    return Markup(
        f'<svg class="spark" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" width="{SPARK_WIDTH}" '
        f'height="{SPARK_HEIGHT}" role="img" aria-label="{escape(label)}">'
        f'<polyline points="{coordinates}"/></svg>'
    )


def bar(value: float | None, top: float, label: str = "", width: int = 160) -> Markup:
    """A horizontal bar of ``value`` against ``top`` (for percentiles and utilisation)."""
    share = 0.0 if not value or top <= 0 else min(1.0, value / top)
    return Markup(
        f'<svg class="bar" viewBox="0 0 {width} 10" width="{width}" height="10" role="img" '
        f'aria-label="{escape(label)}"><rect class="track" width="{width}" height="10"/>'
        f'<rect class="fill" width="{share * width:.1f}" height="10"/></svg>'
    )


def pretty_payload(raw: bytes | str | None) -> str:
    """A payload as indented JSON when it is JSON, else as text (hex when not UTF-8)."""
    if raw is None:
        return ""
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return "hex:" + bytes(raw).hex()
    else:
        text = raw
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def pretty_json(value: Any) -> str:
    """Any JSON-able value, indented (progress, attributes)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def templates() -> Jinja2Templates:
    """The console's templates (shipped in the wheel under ``tenantq/web/templates``)."""
    folder = resources.files("tenantq.web") / "templates"
    environment = Jinja2Templates(directory=str(folder))
    env = environment.env
    env.autoescape = True
    env.filters.update(
        age=format_age,
        count=format_count,
        time=format_time,
        percent=format_percent,
        payload=pretty_payload,
        json=pretty_json,
    )
    env.globals.update(sparkline=sparkline, bar=bar)
    return environment


def hot_lane_of(record: PlacementRecord | None) -> str | None:
    """A tenant's hot-lane membership as on-call reads it: since when, who moved it, why."""
    if record is None or record.mode != "lane":
        return None
    since = record.updated_at.strftime("%H:%M:%S") if record.updated_at else "?"
    who = "a worker" if record.automatic else (record.updated_by or "an operator")
    return f"in the lane since {since} (moved by {who}): {record.reason or 'no reason given'}"
