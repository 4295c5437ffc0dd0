"""Which topic a job is written to: the main topic, or the retry tier that holds it until due."""

from __future__ import annotations

from collections.abc import Sequence


def tier_for_wait(wait_seconds: float, delays_seconds: Sequence[float]) -> int:
    """The first tier whose delay covers ``wait_seconds``; the last tier for longer waits.

    A tier's consumer pauses until the head message's due time (the ``DUE_AT_MS`` header),
    so a job sent to a tier longer than its wait still runs on time; a wait longer than the
    last tier is re-delayed by the worker when it surfaces early.
    """
    if not delays_seconds:
        raise ValueError("a queue needs at least one retry tier")
    for tier, delay in enumerate(delays_seconds):
        if delay >= wait_seconds:
            return tier
    return len(delays_seconds) - 1
