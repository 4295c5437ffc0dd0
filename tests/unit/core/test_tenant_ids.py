"""Tenant ids: what is valid, and errors that name the offending character."""

from __future__ import annotations

import pytest

from tenantq.errors import InvalidTenantId
from tenantq.tenant_ids import validate_tenant_id


@pytest.mark.parametrize("tenant", ["a", "acme", "A.b_c:d-9", "x" * 128])
def test_valid_tenant_ids(tenant: str) -> None:
    assert validate_tenant_id(tenant) == tenant


@pytest.mark.parametrize(
    ("tenant", "message"),
    [
        ("", "empty"),
        ("x" * 129, "129 characters, the limit is 128"),
        ("acme#1", "character '#' at position 4"),
        ("ac me", "character ' ' at position 2"),
        ("caf\u00e9", "character '\u00e9'"),
        (None, "must be a string"),
        (42, "must be a string"),
    ],
)
def test_invalid_tenant_ids(tenant: object, message: str) -> None:
    with pytest.raises(InvalidTenantId, match=message):
        validate_tenant_id(tenant)
