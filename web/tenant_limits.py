"""Tenants' limits in the console: the Tenants page lists them with what is in use now, and
sets or clears them (``tenantq.Tenants``: the same checks as the CLI's); the API reads and
changes them for scripts.

A form or a body is read as text and checked by ``Tenants`` before it reaches the table: a
mistake is a 400 with the reason, never a 500. Changing needs an actor (the console token, or
a signed-in user with the CSRF token); a read-only console has none.

| field                                  | console form                | API (JSON body)         |
| -------------------------------------- | --------------------------- | ----------------------- |
| tenant                                 | required                    | required                |
| queue, job_type                        | '*' (any) when empty        | '*' when absent         |
| max_running, rate, burst, weight       | empty = no limit: the form  | absent = kept, null =   |
|                                        | states the row whole        | removed                 |
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.exceptions import HTTPException

from tenantq.errors import ConfigurationError
from tenantq.quotas.tenants import KEEP, Tenants, limit_row, limit_use_row
from tenantq.tenant_limits import ANY
from tenantq.web.console import acting, console_of
from tenantq.web.messages import shorten
from tenantq.web.security import Actor

api_router = APIRouter(prefix="/api")

#: The most limit rows the Tenants page lists.
MOST_LISTED = 500
LIMIT_FIELDS = ("max_running", "rate", "burst", "weight")


def tenants_of(request: Request) -> Tenants:
    """``tenantq.Tenants`` of this console's deployment."""
    return Tenants(settings=console_of(request).settings)


def limits_context(request: Request) -> dict[str, Any]:
    """What the Tenants page shows of the limits: every row (the first ``MOST_LISTED``) with
    its use now, the defaults, the queues a row may name."""
    tenants = tenants_of(request)
    try:
        uses = tenants.show_all(limit=MOST_LISTED)
    except ConfigurationError as error:  # the table is not there yet
        return {"limits": [], "limits_error": shorten(str(error)), "limit_defaults": None}
    return {
        "limits": uses,
        "limits_error": "",
        "limit_defaults": console_of(request).settings.tenant_defaults,
        "limit_queues": [ANY, *sorted(console_of(request).settings.queues)],
    }


def _form_value(text: str) -> Any:
    """A form field: empty = no limit (None), else the text (``Tenants`` checks it)."""
    text = text.strip()
    return None if not text else text


def change_from_form(request: Request, actor: Actor, form: dict[str, str]) -> tuple[str, bool]:
    """Set a tenant's limits of a queue and job type (the row as the form states it), or clear
    them (``action``): (the message for the page, whether it failed)."""
    tenants = tenants_of(request)
    tenant = form.get("tenant", "")
    queue = form.get("queue", "").strip()
    job_type = form.get("job_type", "").strip()
    action = form.get("action", "set")
    try:
        if action == "clear":
            removed = tenants.clear(tenant, queue=queue or None, job_type=job_type or None)
            if removed:
                return f"{tenant}: {len(removed)} limit row(s) removed", False
            return f"{tenant}: had no limits", False
        if action != "set":
            raise ConfigurationError(f"unknown action {shorten(action)!r}: set or clear")
        row = tenants.set(
            tenant,
            queue=queue or ANY,
            job_type=job_type or ANY,
            updated_by=actor.audit_name,
            **{name: _form_value(form.get(name, "")) for name in LIMIT_FIELDS},
        )
    except ConfigurationError as error:
        return shorten(str(error)), True
    if row is None:
        return f"{tenant}: no limits left (the defaults apply)", False
    return f"{tenant}: limits set (every worker applies them within a second)", False


# -- the API -----------------------------------------------------------------------------------


@api_router.get("/tenants/limits")
def api_limits(request: Request) -> dict[str, Any]:
    """Every limit row (the first ``MOST_LISTED``) with its use now, and the defaults."""
    tenants = tenants_of(request)
    try:
        uses = tenants.show_all(limit=MOST_LISTED)
    except ConfigurationError as error:
        raise HTTPException(503, str(error)) from None
    return {
        "defaults": console_of(request).settings.tenant_defaults.model_dump(),
        "limits": [limit_use_row(use) for use in uses],
    }


@api_router.get("/tenants/{tenant}/limits")
def api_tenant_limits(request: Request, tenant: str) -> dict[str, Any]:
    """One tenant's limits and what is in use now (``tenantq tenants show TENANT --json``)."""
    try:
        return tenants_of(request).show(tenant).as_dict()
    except ConfigurationError as error:
        raise HTTPException(400, str(error)) from None


@api_router.post("/tenants/{tenant}/limits")
async def api_set_limits(
    request: Request, tenant: str, actor: Actor = Depends(acting)
) -> dict[str, Any]:
    """Set limits from a JSON object: ``queue``, ``job_type`` ('*' when absent), and any of
    ``max_running``, ``rate``, ``burst``, ``weight`` (absent = kept, null = removed)."""
    try:
        body = await request.json()
    except ValueError:
        raise HTTPException(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise HTTPException(400, "the body must be a JSON object")
    unknown = sorted(set(body) - {"queue", "job_type", *LIMIT_FIELDS})
    if unknown:
        raise HTTPException(400, f"unknown field(s): {shorten(', '.join(map(str, unknown)))}")
    if not any(name in body for name in LIMIT_FIELDS):
        raise HTTPException(400, f"give at least one of {', '.join(LIMIT_FIELDS)}")
    try:
        row = tenants_of(request).set(
            tenant,
            queue=body.get("queue", ANY),
            job_type=body.get("job_type", ANY),
            updated_by=actor.audit_name,
            **{name: body[name] if name in body else KEEP for name in LIMIT_FIELDS},
        )
    except ConfigurationError as error:
        raise HTTPException(400, str(error)) from None
    return {"tenant": tenant, "limits": limit_row(row) if row is not None else None}


@api_router.post("/tenants/{tenant}/limits/clear")
async def api_clear_limits(
    request: Request, tenant: str, actor: Actor = Depends(acting)
) -> dict[str, Any]:
    """Remove a tenant's limits (only those of ``queue`` / ``job_type`` given as query
    parameters): the defaults apply again."""
    queue = request.query_params.get("queue")
    job_type = request.query_params.get("job_type")
    try:
        removed = tenants_of(request).clear(tenant, queue=queue, job_type=job_type)
    except ConfigurationError as error:
        raise HTTPException(400, str(error)) from None
    return {"tenant": tenant, "removed": [limit_row(limit) for limit in removed]}
