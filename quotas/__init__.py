"""Tenant quotas: a tenant's running cap, start rate and weight, held across the fleet.

The limits are rows of ``tenantq_tenants`` (``tenantq tenants set``, ``tenantq.Tenants``, the
console), with the settings' ``tenant_defaults`` for a tenant without a row. The claim
enforces them where leases are taken (``tenantq.store.quota_claim``), so every worker on every
host obeys one number. A worker keeps a copy of the table (``QuotaBook``, kept fresh by
``QuotaWatcher``) only to know which claims need the limits: a batch of tenants without any
keeps the claim of one plain statement. See docs/quotas.md.
"""
