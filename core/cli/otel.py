"""OpenTelemetry for the commands that trace (``tenantq worker``, ``tenantq dlq replay``):
the SDK from the standard ``OTEL_*`` variables when ``OTEL_TRACES_EXPORTER`` is set
(``tenantq.observability.tracing.configure_from_environment``). Tracing that cannot be set up
is reported and left off: the command still does its work. The SDK exports what is left when
the process exits."""

from __future__ import annotations

import logging
import os

from tenantq.observability import tracing

log = logging.getLogger("tenantq.cli")


def trace_from_environment(service_name: str) -> bool:
    """Set tracing up as the environment says; True when this process now traces with it."""
    try:
        if tracing.configure_from_environment(service_name):
            log.info("tracing on: exporting spans to %s", os.environ.get("OTEL_TRACES_EXPORTER"))
            return True
    except tracing.TracingUnavailable as error:
        log.warning("tracing is off: %s", error)
    return False
