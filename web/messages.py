"""What the console's messages may quote of a request: a bounded piece of it.

A value someone sent can be megabytes long; an error that names it shows its start, so an
answer never grows with the request.
"""

from __future__ import annotations

#: Longest reason an error carries, in characters.
LONGEST_REASON = 300
#: Longest piece of a sent value a message quotes, in characters.
LONGEST_QUOTE = 60


def shorten(text: str, limit: int = LONGEST_REASON) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis says it was cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def quoted(value: str, limit: int = LONGEST_QUOTE) -> str:
    """``value`` as a message quotes it: its ``repr``, cut after ``limit`` characters."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + "\u2026"
