"""Text for people, shared by the command line and the web console."""

from __future__ import annotations


def format_age(seconds: float | None, *, days: bool = False) -> str:
    """``-`` when there is nothing, else a short age: ``850ms``, ``42s``, ``7m05s``, ``3h12m``;
    with ``days``, whole days from 48 hours on (``4d``)."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    if days and seconds >= 172_800:
        return f"{int(seconds // 86_400)}d"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
