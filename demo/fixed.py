"""The demo's workload after the fix is deployed: ``tenantq.demo.fixed:APP``.

Same job types and payloads as ``tenantq.demo.workload``, but the downstream bugs behind the
permanent failures and the poison job are "fixed", so a dead demo job replayed from the DLQ
(``tenantq dlq replay`` or the console, ``tenantq web``) succeeds. Start it on a demo's topics
(``TENANTQ_TOPIC_PREFIX=<the printed prefix>``) to walk through an on-call repair.
"""

from __future__ import annotations

import time

from tenantq.app import App
from tenantq.consumer.context import JobContext
from tenantq.demo.workload import DemoPayload

APP = App()


def _run(payload: DemoPayload) -> None:
    time.sleep(payload.work_ms / 1000)


@APP.job("email", max_attempts=8, timeout=30)
def send_email(ctx: JobContext, payload: DemoPayload) -> None:
    """Deliver one email (the relay now accepts every recipient)."""
    _run(payload)


@APP.job("export", max_attempts=8, timeout=60, concurrency=8)
def build_export(ctx: JobContext, payload: DemoPayload) -> None:
    """Render one export (the crashing renderer is fixed)."""
    _run(payload)


@APP.job("webhook", max_attempts=8, timeout=30)
def deliver_webhook(ctx: JobContext, payload: DemoPayload) -> None:
    """POST one webhook (the endpoints are back)."""
    _run(payload)
