"""Retention: finished jobs (with their attempt rows) and gone workers are deleted on a
policy (``TENANTQ_RETENTION__*``) by the pruner inside every ``tenantq worker``, one at a
time, or at once with ``tenantq prune``."""
