"""Handlers of the tracing scenario (``traced_apps:APP`` under ``tenantq worker``): one that
makes a span of its own, one that fails its first attempt, one that fails permanently until
it has been replayed."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

import tenantq

APP = tenantq.App()


@APP.job("charge", max_attempts=3, timeout=30)
def charge(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
    # The handler's own spans are children of its attempt's.
    with trace.get_tracer("shop").start_as_current_span("card network call"):
        pass


@APP.job("flaky", max_attempts=3, timeout=30)
def flaky(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
    if ctx.attempt == 1:
        raise ConnectionError("the mail server hung up")


@APP.job("doomed", max_attempts=3, timeout=30)
def doomed(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
    if ctx.replays == 0:
        raise tenantq.PermanentError("the account is locked until an operator replays")
