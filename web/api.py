"""The console's JSON API under ``/api/``, for the pages' scripts and for people's scripts.

Reads need nothing; every POST needs ``Authorization: Bearer $TENANTQ_WEB__TOKEN`` (or a
console session and its CSRF token) and names its actor with ``X-Tenantq-Actor`` (default
``api``; audit rows say ``web:<actor>``). Errors are ``{"error": "..."}`` with the status.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from tenantq.dlq.filter import FilterError, parse_time
from tenantq.dlq.reader import DeadLetterReadError
from tenantq.errors import ConfigurationError
from tenantq.states import JobState
from tenantq.store import console as console_store
from tenantq.store import stats
from tenantq.store.job_admin import get_job, list_attempts
from tenantq.store.placement import placement_list
from tenantq.web import job_actions
from tenantq.web.console import acting, console_of, declared_queue, job_id_of
from tenantq.web.dead_letters import (
    LetterFilters,
    current_states,
    read_letters,
    replay_selection,
)
from tenantq.web.messages import quoted
from tenantq.web.pages import JobFilters
from tenantq.web.security import Actor
from tenantq.web.views import hot_lane_of

router = APIRouter(prefix="/api")

#: Most letters one request lists or replays (the DLQ page's limit).
MOST_LETTERS = 5_000
JOB_STATES = frozenset(state.value for state in JobState)


def plain(value: Any) -> Any:
    """Rows as JSON: ids and times as strings, payload bytes as JSON (or text)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", errors="replace")
    return value


@router.get("/queues")
def queues(request: Request) -> dict[str, Any]:
    """Per queue: jobs by state, throughput, oldest runnable age, consumer lag, retry-tier
    depth, DLQ size; the worker group; database and broker health."""
    return console_of(request).overview.read().as_dict()


@router.get("/tenants")
def tenants(request: Request, queue: str = Query("default")) -> dict[str, Any]:
    """The busiest tenants of a queue with their counts and placement."""
    console = console_of(request)
    with console.database.connection() as connection:
        (found,) = stats.job_stats_by_tenant(
            connection,
            queues=[declared_queue(request, queue)],
            top_tenants=console.settings.web.top_tenants,
        )
        placements = {record.tenant_id: record for record in placement_list(connection, queue)}
    result = []
    for name, tenant in found.tenants.items():
        record = placements.get(name)
        result.append(
            {
                "tenant": name,
                **tenant.totals.as_dict(),
                "placement": record.mode if record else "hashed",
                "shards": record.shards if record else None,
                "partitions": list(record.partitions) if record else [],
                "hot_lane": hot_lane_of(record),
            }
        )
    return {"queue": queue, "tenants": result}


@router.get("/jobs")
def jobs(
    request: Request,
    filters: JobFilters = Depends(),
    state: list[str] = Query([]),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """Jobs matching every given filter, newest first."""
    unknown = sorted(set(state) - JOB_STATES)
    if unknown:
        raise HTTPException(400, f"state: {quoted(unknown[0])} is not a job state")
    try:
        search = filters.search(
            states=tuple(state),
            since=parse_time(filters.since) if filters.since else None,
            until=parse_time(filters.until) if filters.until else None,
            limit=limit,
        )
    except FilterError as error:
        raise HTTPException(400, str(error)) from None
    with console_of(request).database.connection() as connection:
        found = console_store.job_search(connection, search)
    return {"jobs": plain(found)}


@router.get("/jobs/{job_id}")
def job(request: Request, job_id: str) -> dict[str, Any]:
    """A job row (payload decoded) and its attempts; 404 for an unknown id."""
    identifier = job_id_of(job_id)
    with console_of(request).database.connection() as connection:
        row = get_job(connection, identifier)
        if row is None:
            raise HTTPException(404, f"no job {identifier}")
        attempts = list_attempts(connection, identifier)
    return {"job": plain(row), "attempts": plain(attempts)}


@router.post("/jobs/{job_id}/cancel")
def job_cancel(request: Request, job_id: str, actor: Actor = Depends(acting)) -> dict[str, Any]:
    """Cancel a job."""
    result = job_actions.cancel(console_of(request).database, job_id_of(job_id))
    return {"job_id": job_id, "result": result.message, "actor": actor.audit_name}


@router.post("/jobs/{job_id}/run")
def job_run(request: Request, job_id: str, actor: Actor = Depends(acting)) -> dict[str, Any]:
    """Run a dead or waiting job again now."""
    console = console_of(request)
    result = job_actions.run_again(
        console.settings, console.database, job_id_of(job_id), actor=actor.audit_name
    )
    return {
        "job_id": job_id,
        "result": result.message,
        "audit_id": result.audit_id,
        "actor": actor.audit_name,
    }


@router.get("/dlq")
def dlq(
    request: Request,
    queue: str = Query("default"),
    filters: LetterFilters = Depends(),
    limit: int = Query(100, ge=1, le=MOST_LETTERS),
) -> dict[str, Any]:
    """Dead letters matching the CLI's filters, with each job's state now; a record that does
    not parse has ``unreadable`` true, ``unreadable_reason`` and its ``raw_headers`` escaped."""
    console = console_of(request)
    try:
        where = filters.parse()
        letters = read_letters(console.settings, declared_queue(request, queue), where, limit)
    except FilterError as error:
        raise HTTPException(400, str(error)) from None
    except DeadLetterReadError as error:
        raise HTTPException(503, f"cannot read the DLQ: {error}") from None
    states = current_states(console.database, letters)
    return {
        "queue": queue,
        "unreadable": sum(1 for letter in letters if letter.unreadable),
        "letters": [
            {**letter.as_dict(), "job_state": states.get(letter.job_id) if letter.job_id else None}
            for letter in letters
        ],
    }


class ReplayRequest(BaseModel):
    """``POST /api/dlq/replay``: which letters (by job id), and how."""

    job_ids: list[Annotated[str, Field(max_length=64)]] = Field(
        min_length=1, max_length=MOST_LETTERS
    )
    dry_run: bool = True
    queue: str = Field("default", max_length=64)
    canary: int = Field(0, ge=0, le=MOST_LETTERS)
    rate: float | None = Field(None, gt=0, allow_inf_nan=False)


@router.post("/dlq/replay")
def dlq_replay(
    request: Request, body: ReplayRequest, actor: Actor = Depends(acting)
) -> dict[str, Any]:
    """Replay (or with ``dry_run`` preview) the letters of ``job_ids``; an audit row names
    the actor either way."""
    try:
        report, audit_id = replay_selection(
            console_of(request).settings,
            body.queue,
            body.job_ids,
            actor=actor.audit_name,
            dry_run=body.dry_run,
            canary=body.canary,
            rate=body.rate,
        )
    except ConfigurationError as error:
        raise HTTPException(400, str(error)) from None
    except DeadLetterReadError as error:
        raise HTTPException(503, f"cannot read the DLQ: {error}") from None
    return {
        "dry_run": report.dry_run,
        "matched": report.matched,
        "replayed": [str(job_id) for job_id in report.replayed_ids],
        "failed": [str(job_id) for job_id in report.failed_ids],
        "actions": dict(report.actions),
        "skipped": dict(report.skip_reasons),
        "unreadable": report.unreadable,
        "canary": report.canary,
        "stopped": report.stopped,
        "audit_id": audit_id,
        "actor": actor.audit_name,
    }
