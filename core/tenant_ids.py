"""The one rule for tenant ids, checked at enqueue and again at consume."""

from __future__ import annotations

import re

from tenantq.errors import InvalidTenantId

TENANT_ID_MAX_LENGTH = 128
_ALLOWED = re.compile(r"[A-Za-z0-9._:-]+")
_DISALLOWED = re.compile(r"[^A-Za-z0-9._:-]")


def validate_tenant_id(tenant_id: object) -> str:
    """Return ``tenant_id`` if it is 1..128 characters of ``[A-Za-z0-9._:-]``, else raise
    ``InvalidTenantId`` naming the problem. ``#`` is excluded because it separates the
    tenant from the shard in a spread partition key."""
    if not isinstance(tenant_id, str):
        raise InvalidTenantId(f"tenant id must be a string, got {type(tenant_id).__name__}")
    if _ALLOWED.fullmatch(tenant_id) and len(tenant_id) <= TENANT_ID_MAX_LENGTH:
        return tenant_id
    if not tenant_id:
        raise InvalidTenantId("tenant id is empty")
    if len(tenant_id) > TENANT_ID_MAX_LENGTH:
        raise InvalidTenantId(
            f"tenant id is {len(tenant_id)} characters, the limit is {TENANT_ID_MAX_LENGTH}"
        )
    bad = _DISALLOWED.search(tenant_id)
    assert bad is not None
    raise InvalidTenantId(
        f"tenant id {tenant_id[:40]!r} has character {bad.group()!r} at position {bad.start()}; "
        "allowed: letters, digits and . _ : -"
    )
