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

from types import ModuleType
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

if TYPE_CHECKING:  # the names ``__getattr__`` imports on first use, for type checkers
    from tenantq.consumer.context import JobContext
    from tenantq.consumer.worker import Worker
    from tenantq.outbox.outbox import Outbox, OutboxRef
    from tenantq.producer.producer import JobRef, Producer
    from tenantq.quotas.tenants import Tenants

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The public names of the layers above the foundation, imported on first use.

    Importing any ``tenantq.*`` module runs this package first, so at import time it loads
    only the foundation: a module of any layer may then be imported first without a circle,
    and ``import tenantq`` stays cheap. Each name loads its own module only (a service that
    only enqueues never loads the worker).
    """
    module: ModuleType
    if name in ("Producer", "JobRef"):
        from tenantq.producer import producer as module
    elif name == "Worker":
        from tenantq.consumer import worker as module
    elif name == "JobContext":
        from tenantq.consumer import context as module
    elif name in ("Outbox", "OutboxRef"):
        from tenantq.outbox import outbox as module
    elif name == "Tenants":
        from tenantq.quotas import tenants as module
    else:
        raise AttributeError(f"module 'tenantq' has no attribute {name!r}")
    return getattr(module, name)


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
    "Tenants",
    "UnknownJobType",
    "Worker",
    "load_settings",
]
