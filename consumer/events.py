"""The worker's events under the name the worker's modules import them by.

They are declared in ``tenantq.observability.worker_events``, below the worker, so that the
metrics that subscribe to them (``tenantq.observability.worker_metrics``) need not import it.
"""

from tenantq.observability.worker_events import READ_FROM_HOT_LANE, READ_FROM_MAIN, WorkerEvents

__all__ = ["READ_FROM_HOT_LANE", "READ_FROM_MAIN", "WorkerEvents"]
