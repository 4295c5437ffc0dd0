"""The tenant id rule under the name the producer, the worker and the console import it by.

It is declared in the foundation (``tenantq.tenant_ids``), so that the app can check the tenant
of a schedule as it is declared without importing a layer above it.
"""

from tenantq.tenant_ids import validate_tenant_id

__all__ = ["validate_tenant_id"]
