"""The Dead letters pages: the DLQ with the CLI's filters, one job's letters in full, and
replay of a selection (dry-run preview first, then canary and rate) through the engine and
audit rows of ``tenantq dlq replay`` (``tenantq.dlq.actions``), the audit naming the console
user (``web:<name>``). A record that does not parse is listed as unreadable with why, shown
in full at ``/dlq/letters/<partition>@<offset>``, and never offered for replay."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

from tenantq.dlq.actions import replay_dead_letters, selected
from tenantq.dlq.filter import DeadLetterFilter, FilterError, parse_position
from tenantq.dlq.reader import DeadLetterReadError
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay import ReplayOptions, ReplayReport
from tenantq.errors import ConfigurationError
from tenantq.settings import Settings
from tenantq.store import console as console_store
from tenantq.store.job_admin import get_job
from tenantq.store.replay import job_state_summary
from tenantq.web.console import SearchText, acting, console_of, declared_queue, job_id_of, render
from tenantq.web.database import Database
from tenantq.web.messages import shorten
from tenantq.web.security import Actor

router = APIRouter(include_in_schema=False)

#: Longest a console replay waits for its canary (a request should not hang for long).
CANARY_TIMEOUT_SECONDS = 120.0


def read_letters(
    settings: Settings, queue: str, where: DeadLetterFilter, limit: int
) -> list[DeadLetter]:
    """The matching letters, at most ``limit`` (bounded: the page shows them all)."""
    with selected(settings, queue, where, limit=limit) as letters:
        return list(letters)


def newest_first(letters: list[DeadLetter]) -> list[DeadLetter]:
    """The letters by time of death, newest first; those with no known time last."""
    earliest = dt.datetime.min.replace(tzinfo=dt.UTC)
    return sorted(letters, key=lambda letter: letter.dead_at or earliest, reverse=True)


def current_states(database: Database, letters: list[DeadLetter]) -> dict[uuid.UUID, str]:
    """Where each letter's job stands now (dead, or succeeded after a replay, ...)."""
    ids = [letter.job_id for letter in letters if letter.job_id is not None]
    with database.connection() as connection:
        return {job: summary.state for job, summary in job_state_summary(connection, ids).items()}


@dataclass(frozen=True)
class LetterFilters(SearchText):
    """The CLI's filters as query text (empty = any): a dependency of the DLQ page and of
    ``GET /api/dlq``."""

    job_id: str = ""

    def parse(self) -> DeadLetterFilter:
        """The filter (``FilterError`` on a bad value)."""
        return DeadLetterFilter.parse(
            tenants=_one_or_none(self.tenant),
            job_types=_one_or_none(self.job_type),
            error_classes=_one_or_none(self.error_class),
            since=self.since.strip() or None,
            until=self.until.strip() or None,
            job_ids=_one_or_none(self.job_id),
        )


def _one_or_none(text: str) -> list[str]:
    return [text.strip()] if text.strip() else []


@router.get("/dlq", response_class=HTMLResponse)
def dlq_page(
    request: Request,
    queue: str = Query("default"),
    filters: LetterFilters = Depends(),
    limit: int = Query(200, ge=1, le=5000),
) -> Response:
    """The dead letters of a queue, filtered; select some and preview their replay."""
    console = console_of(request)
    declared_queue(request, queue)
    form = {"queue": queue, **asdict(filters), "limit": limit}
    context: dict[str, Any] = {"form": form, "letters": [], "states": {}, "error": None}
    status = 200
    try:
        where = filters.parse()
        letters = newest_first(read_letters(console.settings, queue, where, limit))
        context["letters"] = letters
        context["states"] = current_states(console.database, letters)
        by_class: dict[str, int] = {}
        for letter in letters:
            if not letter.unreadable:
                by_class[letter.error_class] = by_class.get(letter.error_class, 0) + 1
        context["by_class"] = sorted(by_class.items(), key=lambda item: -item[1])
        context["unreadable"] = sum(1 for letter in letters if letter.unreadable)
    except FilterError as error:
        context["error"], status = shorten(str(error)), 400
    except DeadLetterReadError as error:
        context["error"], status = f"cannot read the DLQ: {error}", 503
    with console.database.connection() as connection:
        context["audits"] = console_store.replay_audit_recent(connection, limit=10)
    return render(request, "dlq.html", context, status=status, page="dlq")


@router.get("/dlq/letters/{record}", response_class=HTMLResponse)
def letter_page(request: Request, record: str, queue: str = Query("default")) -> Response:
    """Every dead letter of one job (``record`` is its id), or the one record at
    ``<partition>@<offset>``, readable or not: headers, envelope, payload; the job row now."""
    console = console_of(request)
    declared_queue(request, queue)
    position = parse_position(record)
    if position is not None:
        identifier: uuid.UUID | None = None
        where = DeadLetterFilter(positions=frozenset({position}))
    else:
        identifier = job_id_of(record)
        where = DeadLetterFilter(job_ids=frozenset({identifier}))
    try:
        letters = read_letters(console.settings, queue, where, 50)
    except DeadLetterReadError as error:
        raise HTTPException(503, f"cannot read the DLQ: {error}") from None
    if not letters:
        what = f"at {record}" if position is not None else f"of job {identifier}"
        raise HTTPException(404, f"no dead letter {what} in queue {queue}")
    job_id = identifier or letters[0].job_id
    job = None
    if job_id is not None:
        with console.database.connection() as connection:
            job = get_job(connection, job_id)
    context = {"letters": letters, "job": job, "queue": queue, "job_id": job_id, "at": record}
    return render(request, "letter.html", context, page="dlq")


def replay_selection(
    settings: Settings,
    queue: str,
    job_ids: list[str],
    *,
    actor: str,
    dry_run: bool,
    canary: int = 0,
    rate: float | None = None,
) -> tuple[ReplayReport, int]:
    """Replay (or preview) the letters of ``job_ids`` in ``queue`` with the CLI's engine;
    returns the report and the id of its audit row."""
    if queue not in settings.queues:
        raise ConfigurationError(f"queue {queue!r} is not declared")
    if not job_ids:
        raise ConfigurationError("select at least one dead letter to replay")
    try:
        where = DeadLetterFilter.parse(job_ids=job_ids)
    except FilterError as error:
        raise ConfigurationError(str(error)) from None
    options = ReplayOptions(
        dry_run=dry_run, rate=rate, canary=canary, canary_timeout=CANARY_TIMEOUT_SECONDS
    )
    return replay_dead_letters(settings, queue, where, actor=actor, options=options)


@router.post("/dlq/replay", response_class=HTMLResponse)
def replay_action(
    request: Request,
    actor: Actor = Depends(acting),
    queue: str = Form("default"),
    job_id: list[str] = Form([]),
    dry_run: str = Form("1"),
    canary: str = Form("0"),
    rate: str = Form(""),
) -> Response:
    """Preview (``dry_run=1``, the default) or run a replay of the selected letters."""
    console = console_of(request)
    preview = dry_run != "0"
    context: dict[str, Any] = {"queue": queue, "dry_run": preview}
    try:
        canary_count = int(canary or 0)
        rate_value = float(rate) if rate.strip() else None
        report, audit_id = replay_selection(
            console.settings,
            queue,
            job_id,
            actor=actor.audit_name,
            dry_run=preview,
            canary=canary_count,
            rate=rate_value,
        )
    except (ConfigurationError, ValueError) as error:
        context["error"] = shorten(str(error))
        return render(request, "replay.html", context, status=400, page="dlq")
    except DeadLetterReadError as error:
        context["error"] = f"cannot read the DLQ: {error}"
        return render(request, "replay.html", context, status=503, page="dlq")
    context.update(report=report, audit_id=audit_id, actor=actor)
    return render(request, "replay.html", context, page="dlq")
