"""``tenantq.Tenants``: set, show and clear tenants' limits from Python (the CLI, the console
and the API go through it too).

Every input is checked here before it reaches the table (whose CHECKs hold the same bounds):
a tenant id by the tenant id rule, a queue among the settings' queues (or '*'), a job type by
the job type rule (or '*'), each limit within ``tenantq.tenant_limits``. A mistake is a
``ConfigurationError`` that says what is wrong, never a database error. A change reaches every
worker within a second (``QuotaWatcher``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

import psycopg

from tenantq.app import JOB_TYPE_PATTERN, App
from tenantq.errors import ConfigurationError, InvalidTenantId
from tenantq.operator_name import operator_name
from tenantq.settings import Settings, TenantDefaults
from tenantq.store.engine import DeploymentConnection, connect
from tenantq.store.quotas import (
    LimitUse,
    TenantLimit,
    tenant_limit_delete,
    tenant_limit_lock,
    tenant_limit_upsert,
    tenant_limit_use,
    tenant_running,
)
from tenantq.tenant_ids import validate_tenant_id
from tenantq.tenant_limits import (
    ANY,
    LimitError,
    check_burst,
    check_max_running,
    check_rate,
    check_weight,
)

#: A limit to leave as it is (the default of every limit ``Tenants.set`` takes).
KEEP: EllipsisType = ...
#: The most rows ``Tenants.show`` of every tenant lists.
MOST_SHOWN = 10_000


@dataclass(frozen=True)
class TenantQuotas:
    """What ``Tenants.show`` says of a tenant: its rows with what each holds back now, and,
    where its own tenant-wide row does not say, the defaults (``defaults``, with what the
    tenant runs now in ``default_use``)."""

    tenant_id: str
    rows: list[LimitUse]
    defaults: TenantDefaults
    #: The tenant's live leases and last throttle when the defaults are its tenant-wide
    #: limits (no tenant-wide row of its own); None otherwise.
    default_use: LimitUse | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: limits, use, the defaults that apply."""
        return {
            "tenant": self.tenant_id,
            "limits": [limit_use_row(use) for use in self.rows],
            "defaults": self.defaults.model_dump(),
            "default_use": limit_use_row(self.default_use) if self.default_use else None,
        }


def limit_row(limit: TenantLimit) -> dict[str, Any]:
    """One limit row as JSON (the CLI's, ``show``'s and the console API's)."""
    return {
        "tenant": limit.tenant_id,
        "queue": limit.queue,
        "job_type": limit.job_type,
        **limit.limits(),
        "updated_at": limit.updated_at.isoformat() if limit.updated_at else None,
        "updated_by": limit.updated_by,
    }


def limit_use_row(use: LimitUse) -> dict[str, Any]:
    """One limit row and how much of it is in use, as JSON (``limit_row`` and the use)."""
    return {
        **limit_row(use.limit),
        "running": use.running,
        "burst_left": use.burst_left,
        "throttled_reason": use.throttled_reason,
        "throttled_seconds_ago": use.throttled_seconds_ago,
    }


class Tenants:
    """Tenants' limits of the deployment of ``app`` (or of ``settings``): ``set``, ``show``,
    ``clear``. Each call opens a connection of its own; safe to use from several threads."""

    def __init__(self, app: App | None = None, *, settings: Settings | None = None) -> None:
        if settings is None:
            if app is None:
                raise ConfigurationError("Tenants needs an app or settings")
            settings = app.settings
        self.settings = settings

    # -- inputs ---------------------------------------------------------------------------------

    def scope(self, tenant: str, queue: str = ANY, job_type: str = ANY) -> tuple[str, str, str]:
        """(tenant, queue, job type) checked: a valid tenant id, a declared queue or '*', a
        valid job type or '*'."""
        try:
            validate_tenant_id(tenant)
        except InvalidTenantId as error:
            raise ConfigurationError(str(error)) from None
        if not isinstance(queue, str) or (queue != ANY and queue not in self.settings.queues):
            declared = ", ".join(sorted(self.settings.queues))
            raise ConfigurationError(
                f"queue {_shown(queue)} is not declared (declared: {declared}; '*' = any queue)"
            )
        if not isinstance(job_type, str) or (
            job_type != ANY and not JOB_TYPE_PATTERN.match(job_type)
        ):
            raise ConfigurationError(
                f"job type {_shown(job_type)} must match {JOB_TYPE_PATTERN.pattern} "
                "('*' = any job type)"
            )
        return tenant, queue, job_type

    # -- changes --------------------------------------------------------------------------------

    def set(
        self,
        tenant: str,
        *,
        queue: str = ANY,
        job_type: str = ANY,
        max_running: int | None | EllipsisType = KEEP,
        rate: float | None | EllipsisType = KEEP,
        burst: int | None | EllipsisType = KEEP,
        weight: int | None | EllipsisType = KEEP,
        updated_by: str | None = None,
    ) -> TenantLimit | None:
        """Set the limits of ``tenant``'s jobs of ``queue`` and ``job_type`` ('*' = any):
        each given value replaces the row's, ``None`` removes it, ``KEEP`` (the default)
        leaves it. Returns the row as stored, or None when nothing is left to limit (the row
        is deleted). ``burst`` needs a ``rate``; a ``weight`` applies to a queue, not a job
        type."""
        tenant, queue, job_type = self.scope(tenant, queue, job_type)
        given = {
            "max_running": _checked(max_running, check_max_running),
            "rate": _checked(rate, check_rate),
            "burst": _checked(burst, check_burst),
            "weight": _checked(weight, check_weight),
        }
        if given["weight"] not in (KEEP, None) and job_type != ANY:
            raise ConfigurationError(
                "a weight shares a queue between tenants: set it for a queue (--job-type '*')"
            )
        with self._database(transaction=True) as connection:
            row = tenant_limit_lock(connection, tenant, queue, job_type)
            if row is None:
                row = TenantLimit(tenant, queue, job_type, None, None, None, None)
            changes = {name: value for name, value in given.items() if value is not KEEP}
            row = dataclasses.replace(row, **changes, updated_by=updated_by or operator_name())
            if row.rate is None and row.burst is not None:
                if "burst" in changes:
                    raise ConfigurationError("a burst needs a rate: give --rate too")
                row = dataclasses.replace(row, burst=None)  # the rate it went with is gone
            if row.empty:
                tenant_limit_delete(connection, tenant, queue, job_type)
                return None
            return tenant_limit_upsert(connection, row)

    def clear(
        self, tenant: str, *, queue: str | None = None, job_type: str | None = None
    ) -> list[TenantLimit]:
        """Remove the rows of ``tenant`` (only those of ``queue`` and ``job_type`` when
        given): the defaults apply again. Returns the rows removed."""
        tenant, _, _ = self.scope(tenant, queue or ANY, job_type or ANY)
        with self._database(transaction=True) as connection:
            return tenant_limit_delete(connection, tenant, queue, job_type)

    # -- reading --------------------------------------------------------------------------------

    def show(self, tenant: str) -> TenantQuotas:
        """The limits of ``tenant`` and what they hold back now."""
        tenant, _, _ = self.scope(tenant)
        with self._database() as connection:
            rows = tenant_limit_use(connection, tenant)
            wide = any(use.limit.queue == ANY and use.limit.job_type == ANY for use in rows)
            default_use = None if wide else tenant_running(connection, tenant)
        return TenantQuotas(tenant, rows, self.settings.tenant_defaults, default_use)

    def show_all(self, limit: int = MOST_SHOWN) -> list[LimitUse]:
        """Every tenant's rows (the first ``limit``) with what each holds back now."""
        with self._database() as connection:
            return tenant_limit_use(connection, limit=limit)

    @contextmanager
    def _database(self, *, transaction: bool = False) -> Iterator[DeploymentConnection]:
        """A connection for one call (one transaction when ``transaction``); a table that is
        not there, or a row the table refuses, is a ``ConfigurationError``."""
        try:
            with connect(
                self.settings, autocommit=not transaction, application_name="tenantq-tenants"
            ) as connection:
                yield connection
        except psycopg.errors.UndefinedTable:
            raise ConfigurationError(
                "the tenants table is missing: run `tenantq db upgrade`"
            ) from None
        except psycopg.errors.CheckViolation as error:
            constraint = getattr(error.diag, "constraint_name", None) or "a limit's bounds"
            raise ConfigurationError(f"the table refused the limits ({constraint})") from None


def _checked(value: object, check: Any) -> Any:
    if value is KEEP or value is None:
        return value
    try:
        return check(value)
    except LimitError as error:
        raise ConfigurationError(str(error)) from None


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"
