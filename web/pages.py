"""The console's pages for people: Overview (and its self-refreshing fragment), Tenants with
placement actions, Jobs search, and a job's page with cancel and run-again actions."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException

from tenantq.dlq.filter import FilterError, parse_time
from tenantq.errors import ConfigurationError
from tenantq.partitioner.placement import Placement
from tenantq.states import JobState
from tenantq.store import console as console_store
from tenantq.store import stats
from tenantq.store.job_admin import get_job, list_attempts
from tenantq.store.placement import (
    PlacementRecord,
    placement_delete,
    placement_list,
    placement_upsert,
)
from tenantq.tenant_ids import validate_tenant_id
from tenantq.web import job_actions
from tenantq.web.console import SearchText, acting, console_of, declared_queue, job_id_of, render
from tenantq.web.messages import shorten
from tenantq.web.security import Actor
from tenantq.web.tenant_limits import change_from_form, limits_context
from tenantq.web.views import hot_lane_of

router = APIRouter(include_in_schema=False)

#: Windows offered for the latency percentiles, in minutes.
LATENCY_WINDOWS = {15: "15 min", 60: "1 hour", 1440: "24 hours"}


@router.get("/", response_class=HTMLResponse)
def overview_page(request: Request) -> Response:
    """Per queue: jobs by state, throughput, oldest runnable age, Kafka backlog; workers."""
    overview = console_of(request).overview.read()
    return render(request, "overview.html", {"overview": overview}, page="overview")


@router.get("/fragments/overview", response_class=HTMLResponse)
def overview_fragment(request: Request) -> Response:
    """The live part of the overview alone: what the page's script swaps in."""
    overview = console_of(request).overview.read()
    return render(request, "_overview_live.html", {"overview": overview})


# -- tenants ---------------------------------------------------------------------------------


def _tenants_context(request: Request, queue: str, sort: str, window: int) -> dict[str, Any]:
    console = console_of(request)
    with console.database.connection() as connection:
        (queue_stats,) = stats.job_stats_by_tenant(
            connection, queues=[queue], top_tenants=console.settings.web.top_tenants
        )
        placements = {record.tenant_id: record for record in placement_list(connection, queue)}
        latency = console_store.job_latency_by_tenant_class(connection, queue, minutes=window)
    rows: list[dict[str, Any]] = [
        {
            "tenant": name,
            "counts": tenant.totals,
            "placement": placements.get(name),
            "hot_lane": hot_lane_of(placements.get(name)),
        }
        for name, tenant in queue_stats.tenants.items()
        if name != stats.OTHER_TENANT
    ]
    if sort == "throughput":
        rows.sort(key=lambda row: (-row["counts"].succeeded_last_minute, -row["counts"].depth))
    else:
        rows.sort(key=lambda row: (-row["counts"].depth, -row["counts"].succeeded_last_minute))
    listed = {row["tenant"] for row in rows}
    idle_placed = [record for name, record in placements.items() if name not in listed]
    other = queue_stats.tenants.get(stats.OTHER_TENANT)
    return {
        "queue": queue,
        "sort": sort,
        "window": window,
        "windows": LATENCY_WINDOWS,
        "rows": rows,
        "other": other.totals if other else None,
        "idle_placed": idle_placed,
        "latency": latency,
        "latency_top": max((item.p99 for item in latency), default=0.0),
        "partitions": console.settings.queue(queue).partitions,
        "describe": _describe,
        **limits_context(request),
    }


@router.post("/tenants/limits", response_class=HTMLResponse)
def limits_action(
    request: Request,
    actor: Actor = Depends(acting),
    page_queue: str = Form("default"),
    action: str = Form("set"),
    tenant: str = Form(...),
    queue: str = Form(""),
    job_type: str = Form(""),
    max_running: str = Form(""),
    rate: str = Form(""),
    burst: str = Form(""),
    weight: str = Form(""),
) -> Response:
    """Set (the row as the form states it: an empty field is no limit) or clear a tenant's
    limits; every worker applies the change within a second."""
    declared_queue(request, page_queue)
    form = {"action": action, "tenant": tenant, "queue": queue, "job_type": job_type}
    form.update(max_running=max_running, rate=rate, burst=burst, weight=weight)
    flash, failed = change_from_form(request, actor, form)
    context = _tenants_context(request, page_queue, "backlog", 60)
    context.update(flash=flash, flash_failed=failed)
    return render(request, "tenants.html", context, status=400 if failed else 200)


def _describe(record: PlacementRecord | None) -> str:
    if record is None:
        return "hashed"
    try:
        return Placement(
            record.mode,  # type: ignore[arg-type]
            shards=record.shards,
            partitions=record.partitions,
        ).describe()
    except ConfigurationError:
        return f"{record.mode} (invalid row)"


@router.get("/tenants", response_class=HTMLResponse)
def tenants_page(
    request: Request,
    queue: str = Query("default"),
    sort: str = Query("backlog"),
    window: int = Query(60),
) -> Response:
    """Busiest tenants by backlog or throughput, their placement, latency per class."""
    declared_queue(request, queue)
    window = window if window in LATENCY_WINDOWS else 60
    context = _tenants_context(request, queue, sort, window)
    return render(request, "tenants.html", context, page="tenants")


@router.post("/tenants/placement", response_class=HTMLResponse)
def placement_action(
    request: Request,
    actor: Actor = Depends(acting),
    queue: str = Form("default"),
    tenant: str = Form(...),
    action: str = Form(...),
    shards: str = Form(""),
    partitions: str = Form(""),
) -> Response:
    """Pin, spread or release a tenant (the placement table; producers follow within TTL)."""
    console = console_of(request)
    declared_queue(request, queue)
    flash, failed = "", False
    try:
        validate_tenant_id(tenant)
        with console.database.connection() as connection:
            if action == "release":
                deleted = placement_delete(connection, queue=queue, tenant_id=tenant)
                flash = f"{tenant}: " + ("back to hashed" if deleted else "already hashed")
            else:
                placement = _placement_of(action, shards, partitions)
                placement.check_partition_count(console.settings.queue(queue).partitions)
                placement_upsert(
                    connection,
                    queue=queue,
                    tenant_id=tenant,
                    placement=placement,
                    updated_by=actor.audit_name,
                )
                ttl = console.settings.producer.placement_ttl_seconds
                flash = f"{tenant}: {placement.describe()} (producers follow within {ttl:g}s)"
    except (ConfigurationError, ValueError) as error:
        flash, failed = shorten(str(error)), True
    context = _tenants_context(request, queue, "backlog", 60)
    context.update(flash=flash, flash_failed=failed)
    return render(request, "tenants.html", context, status=400 if failed else 200)


def _placement_of(action: str, shards: str, partitions: str) -> Placement:
    if action == "spread":
        try:
            return Placement.spread(int(shards))
        except ValueError:
            raise ConfigurationError(f"spread needs a number of keys, got {shards!r}") from None
    if action == "lane":
        return Placement.lane()
    if action == "pin":
        try:
            numbers = [int(part) for part in partitions.replace(" ", "").split(",") if part]
        except ValueError:
            raise ConfigurationError(
                f"pin needs partition numbers separated by commas, got {partitions!r}"
            ) from None
        return Placement.pinned(numbers)
    raise ConfigurationError(f"unknown placement action {action!r}")


# -- jobs ------------------------------------------------------------------------------------


def _time(text: str | None, name: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        return parse_time(text)
    except FilterError as error:
        raise ValueError(f"{name}: {error}") from None


@dataclass(frozen=True)
class JobFilters(SearchText):
    """The job search's filters as query text (empty = any) but the states, which the page
    takes one of and the API several: a dependency of the Jobs page and of
    ``GET /api/jobs``."""

    queue: str = ""

    def search(
        self,
        *,
        states: tuple[str, ...],
        since: dt.datetime | None,
        until: dt.datetime | None,
        limit: int,
    ) -> console_store.JobSearch:
        """The store's search: these filters, and the states and times as the caller read
        them."""
        return console_store.JobSearch(
            queue=self.queue or None,
            tenant=self.tenant or None,
            job_type=self.job_type or None,
            states=states,
            error_class=self.error_class or None,
            since=since,
            until=until,
            limit=limit,
        )


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(
    request: Request,
    id: str = Query(""),
    filters: JobFilters = Depends(),
    state: str = Query(""),
    limit: int = Query(100, ge=1, le=1000),
) -> Response:
    """Search jobs; an id goes straight to the job's page."""
    if id.strip():
        return RedirectResponse(f"/jobs/{job_id_of(id.strip())}", status_code=303)
    form = {**asdict(filters), "state": state, "limit": limit}
    context: dict[str, Any] = {"form": form, "states": [s.value for s in JobState]}
    try:
        if state and state not in context["states"]:
            raise ValueError(f"state: {state!r} is not a job state")
        search = filters.search(
            states=(state,) if state else (),
            since=_time(filters.since, "since"),
            until=_time(filters.until, "until"),
            limit=limit,
        )
    except ValueError as error:
        context.update(jobs=[], error=shorten(str(error)))
        return render(request, "jobs.html", context, status=400, page="jobs")
    with console_of(request).database.connection() as connection:
        context["jobs"] = console_store.job_search(connection, search)
    return render(request, "jobs.html", context, page="jobs")


def job_context(request: Request, job_id: uuid.UUID) -> dict[str, Any]:
    """The job row and its attempts; 404 for an unknown id."""
    with console_of(request).database.connection() as connection:
        job = get_job(connection, job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        attempts = list_attempts(connection, job_id)
    return {"job": job, "attempts": attempts}


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str) -> Response:
    """One job: state, payload, attempts as a timeline, progress, lease; actions."""
    context = job_context(request, job_id_of(job_id.strip()))
    return render(request, "job.html", context, page="jobs")


@router.post("/jobs/{job_id}/cancel", response_class=HTMLResponse)
def job_cancel(request: Request, job_id: str, actor: Actor = Depends(acting)) -> Response:
    """Cancel the job (it never runs if not started; a running job is asked to stop)."""
    identifier = job_id_of(job_id.strip())
    result = job_actions.cancel(console_of(request).database, identifier)
    context = job_context(request, identifier)
    context["flash"] = f"{result.message} (by {actor.name})"
    return render(request, "job.html", context, page="jobs")


@router.post("/jobs/{job_id}/run", response_class=HTMLResponse)
def job_run_again(request: Request, job_id: str, actor: Actor = Depends(acting)) -> Response:
    """Run the job again now: a dead job is replayed from the DLQ, a waiting one made due."""
    identifier = job_id_of(job_id.strip())
    console = console_of(request)
    result = job_actions.run_again(
        console.settings, console.database, identifier, actor=actor.audit_name
    )
    context = job_context(request, identifier)
    audit = f", audit row {result.audit_id}" if result.audit_id is not None else ""
    context["flash"] = f"{result.message} (by {actor.name}{audit})"
    return render(request, "job.html", context, page="jobs")
