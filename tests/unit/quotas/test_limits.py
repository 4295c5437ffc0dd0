"""A tenant's limits get the same answer at every door: the bounds of ``tenant_limits``, the
table's patterns in step with the rules they repeat, the settings' defaults checked alike; and
a worker's copy of the limits decides which claims apply them and how queues are shared."""

from __future__ import annotations

import math
import re

import pytest
from fakes import is_tenant_id
from pydantic import ValidationError

import tenantq
from tenantq.app import JOB_TYPE_PATTERN
from tenantq.quotas.book import QuotaBook
from tenantq.settings import TenantDefaults
from tenantq.store.quotas import TenantLimit
from tenantq.tenant_limits import (
    JOB_TYPE_CHECK,
    QUEUE_NAME_CHECK,
    TENANT_ID_CHECK,
    LimitError,
    check_burst,
    check_max_running,
    check_rate,
    check_weight,
)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (check_max_running, 0),
        (check_max_running, -1),
        (check_max_running, 1.5),
        (check_max_running, True),
        (check_max_running, "9" * 30),
        (check_max_running, "ten"),
        (check_max_running, None),
        (check_rate, 0),
        (check_rate, math.nan),
        (check_rate, math.inf),
        (check_rate, "1e400"),
        (check_rate, "-1"),
        (check_rate, [40]),
        (check_burst, 0),
        (check_burst, 10**7),
        (check_weight, 0),
        (check_weight, 1001),
        (check_weight, "4.5"),
    ],
)
def test_a_value_out_of_bounds_is_a_sentence_not_a_crash(check: object, value: object) -> None:
    with pytest.raises(LimitError) as raised:
        check(value)  # type: ignore[operator]
    assert len(str(raised.value)) < 200


def test_values_in_bounds_are_taken_in_their_type() -> None:
    assert check_max_running("5") == 5 and check_max_running(5.0) == 5
    assert check_rate("40") == 40.0 and check_rate(0.5) == 0.5
    assert check_burst(10) == 10 and check_weight("4") == 4


@pytest.mark.parametrize(
    "text",
    ["acme", "a.b:c-d_e", "x" * 128, "x" * 129, "", "a b", "é", "a\x00b", "*", "a/b"],
)
def test_the_tables_tenant_pattern_is_the_tenant_id_rule(text: str) -> None:
    assert bool(re.fullmatch(TENANT_ID_CHECK.strip("^$"), text)) == is_tenant_id(text)


@pytest.mark.parametrize("text", ["send_email", "a.b:c-d", "x" * 128, "x" * 129, "", "a b", "*"])
def test_the_tables_job_type_pattern_is_the_apps(text: str) -> None:
    assert bool(re.match(JOB_TYPE_CHECK, text)) == bool(JOB_TYPE_PATTERN.match(text))


@pytest.mark.parametrize("name", ["default", "a-b_c", "x" * 64, "x" * 65, "", "a.b", "*"])
def test_the_tables_queue_pattern_is_the_settings(name: str) -> None:
    try:
        tenantq.Settings(queues={name: {}})
        valid = True
    except (ValidationError, ValueError):
        valid = False
    assert bool(re.match(QUEUE_NAME_CHECK, name)) == valid


def test_defaults_from_the_environment_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_TENANT_DEFAULTS__MAX_RUNNING", "10")
    monkeypatch.setenv("TENANTQ_TENANT_DEFAULTS__RATE", "2.5")
    monkeypatch.setenv("TENANTQ_TENANT_DEFAULTS__BURST", "5")
    defaults = tenantq.Settings().tenant_defaults
    assert (defaults.max_running, defaults.rate, defaults.burst, defaults.weight) == (10, 2.5, 5, 1)
    for name, value in (("RATE", "nan"), ("MAX_RUNNING", "0"), ("WEIGHT", "0")):
        monkeypatch.setenv(f"TENANTQ_TENANT_DEFAULTS__{name}", value)
        with pytest.raises(ValidationError):
            tenantq.Settings()
        monkeypatch.delenv(f"TENANTQ_TENANT_DEFAULTS__{name}")
    monkeypatch.delenv("TENANTQ_TENANT_DEFAULTS__RATE", raising=False)
    with pytest.raises(ValidationError, match="burst needs a rate"):
        tenantq.Settings()


def row(tenant: str, queue: str = "*", **limits: object) -> TenantLimit:
    values = {"max_running": None, "rate": None, "burst": None, "weight": None, **limits}
    return TenantLimit(tenant, queue, "*", **values)  # type: ignore[arg-type]


def test_the_book_sends_only_limited_tenants_through_the_limited_claim() -> None:
    book = QuotaBook(TenantDefaults())
    # Not read yet: every tenant takes the limited claim (it reads the table itself).
    assert not book.unlimited and book.quotas_of({"acme"}) is not None
    book.replace([row("acme", max_running=5), row("globex", "mail", weight=4)])
    assert not book.unlimited
    claim = book.quotas_of({"acme", "initech"})
    assert claim is not None and claim.limited_tenants == {"acme"}
    assert book.quotas_of({"initech", "globex"}) is None  # a weight alone limits no start
    assert book.fair("mail") and not book.fair("default") and book.any_fair
    assert book.weight("mail", "globex") == 4 and book.weight("default", "globex") == 1
    book.replace([])
    assert book.unlimited and not book.any_fair


def test_defaults_with_a_cap_limit_every_tenant() -> None:
    book = QuotaBook(TenantDefaults(max_running=3, weight=2))
    book.replace([row("acme", weight=2)])  # the default's weight: no share-out
    claim = book.quotas_of({"anyone"})
    assert claim is not None and claim.default_max_running == 3
    assert not book.any_fair and book.weight("default", "anyone") == 2
