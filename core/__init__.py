"""tenantq: background jobs over Apache Kafka, with PostgreSQL as the source of truth.

The public surface::

    import tenantq

    app = tenantq.App()

    @app.job("send_email", queue="default", max_attempts=8, timeout=30)
    def send_email(ctx: tenantq.JobContext, payload: SendEmail) -> None: ...

    with tenantq.Producer(app=app) as producer:
        ref = send_email.enqueue(producer, tenant="acme", payload=SendEmail(...)).result()
        ref = producer.enqueue("send_email", tenant="acme", payload={...}).result()

    tenantq.Worker(app, queues=["default"]).run()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenantq.app import App, JobType
from tenantq.enqueue_request import EnqueueRequest
from tenantq.errors import (
    AdmissionError,
    AdmissionRejected,
    ConfigurationError,
    EnqueueFailed,
    InvalidJobError,
    InvalidTenantId,
    JobConflict,
    LatencyBudgetExceeded,
    PayloadValidationError,
    PermanentError,
    QueueFull,
    RateLimited,
    RetryableError,
    Snooze,
    TenantqError,
    UnknownJobType,
)
from tenantq.handles import JobHandle
from tenantq.settings import QueueSettings, Settings, load_settings
from tenantq.states import JobState

if TYPE_CHECKING:  # the lazily imported names below, for type checkers
    from tenantq.consumer.context import JobContext
    from tenantq.consumer.worker import Worker
    from tenantq.outbox.outbox import Outbox, OutboxRef
    from tenantq.producer.producer import JobRef, Producer

__version__ = "0.1.0"

# Imported on first use so that `import tenantq` stays cheap and free of cycles.
_LAZY = {
    "Producer": ("tenantq.producer.producer", "Producer"),
    "JobRef": ("tenantq.producer.producer", "JobRef"),
    "Worker": ("tenantq.consumer.worker", "Worker"),
    "JobContext": ("tenantq.consumer.context", "JobContext"),
    "Outbox": ("tenantq.outbox.outbox", "Outbox"),
    "OutboxRef": ("tenantq.outbox.outbox", "OutboxRef"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'tenantq' has no attribute {name!r}")


__all__ = [
    "AdmissionError",
    "AdmissionRejected",
    "App",
    "ConfigurationError",
    "EnqueueFailed",
    "EnqueueRequest",
    "InvalidJobError",
    "InvalidTenantId",
    "JobConflict",
    "JobContext",
    "JobHandle",
    "JobRef",
    "JobState",
    "JobType",
    "LatencyBudgetExceeded",
    "Outbox",
    "OutboxRef",
    "PayloadValidationError",
    "PermanentError",
    "Producer",
    "QueueFull",
    "QueueSettings",
    "RateLimited",
    "RetryableError",
    "Settings",
    "Snooze",
    "TenantqError",
    "UnknownJobType",
    "Worker",
    "load_settings",
]
