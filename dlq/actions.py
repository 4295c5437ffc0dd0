"""The DLQ operations behind `tenantq dlq`, callable from code: select, replay, purge.

Each replay, purge or dry run writes one ``tenantq_replay_audit`` row, even when it stops
early or fails half-way (then with what was done until then), so "who replayed what" always
has an answer.
"""

from __future__ import annotations

import getpass
import itertools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tenantq.dlq.filter import DeadLetterFilter
from tenantq.dlq.header_values import printable
from tenantq.dlq.purge import PurgePlan, execute_purge, plan_purge
from tenantq.dlq.reader import DeadLetterReader
from tenantq.dlq.records import DeadLetter
from tenantq.dlq.replay import Replayer, ReplayOptions, ReplayOutcome, ReplayReport
from tenantq.errors import ConfigurationError
from tenantq.settings import Settings
from tenantq.store import replay as replay_store
from tenantq.store.engine import connect
from tenantq.topics import main_topic

#: What an audit row's actor may be: a name, not text (``ops``, ``web:alice``, ``uid:1000``,
#: ``alice@example.com``). Newlines, markup and unbounded lengths stay out of the audit trail.
ACTOR = re.compile(r"[A-Za-z0-9._@:+-]{1,100}")
ACTOR_RULE = "1-100 letters, digits or . _ @ : + -"


def validate_actor(actor: str) -> str:
    """``actor`` if it is a name audit rows can hold (``ACTOR``), else ``ConfigurationError``."""
    if ACTOR.fullmatch(actor) is None:
        raise ConfigurationError(
            f"actor '{printable(actor, 40)}' is not a name: {ACTOR_RULE} (it goes into audit rows)"
        )
    return actor


def current_actor() -> str:
    """Who is at the keyboard, for audit rows when ``--actor`` is not given: the login name
    when it is a valid actor, else ``uid:<n>``."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        name = ""
    return name if ACTOR.fullmatch(name) else f"uid:{os.getuid()}"


@contextmanager
def selected(
    settings: Settings,
    queue: str,
    where: DeadLetterFilter,
    *,
    limit: int | None = None,
    on_scanned: Callable[[int], None] | None = None,
    on_open: Callable[[DeadLetterReader], None] | None = None,
) -> Iterator[Iterator[DeadLetter]]:
    """The DLQ records of ``queue`` that match ``where``, streamed, at most ``limit``."""
    with _reader(settings, queue, where) as reader:
        if on_open is not None:
            on_open(reader)
        yield _matching(reader, where, limit, on_scanned)


def replay_dead_letters(
    settings: Settings,
    queue: str,
    where: DeadLetterFilter,
    *,
    actor: str,
    options: ReplayOptions = ReplayOptions(),
    limit: int | None = None,
    on_scanned: Callable[[int], None] | None = None,
    on_open: Callable[[DeadLetterReader], None] | None = None,
    on_outcome: Callable[[ReplayOutcome], None] | None = None,
) -> tuple[ReplayReport, int]:
    """Replay (or with ``options.dry_run`` only preview) the matching records; returns the
    report and the id of its audit row. See ``tenantq.dlq.replay`` for the order that keeps
    replays safe. Unreadable records are skipped and counted (``ReplayReport.unreadable``)."""
    validate_actor(actor)
    with connect(settings, autocommit=True, application_name="tenantq-dlq") as connection:
        report: ReplayReport | None = None
        try:
            with _reader(settings, queue, where) as reader:
                if on_open is not None:
                    on_open(reader)
                replayer = Replayer(
                    settings,
                    queue,
                    connection,
                    main_partitions=reader.partition_count(
                        main_topic(settings.topic_prefix, queue)
                    ),
                    options=options,
                    on_outcome=on_outcome,
                )
                report = replayer.report
                replayer.run(_matching(reader, where, limit, on_scanned))
        finally:
            if report is not None:
                audit_id = replay_store.replay_audit_insert(
                    connection,
                    actor=actor,
                    queue=queue,
                    action="replay",
                    filter_=_audit_filter(where, limit),
                    dry_run=options.dry_run,
                    matched=report.matched,
                    replayed=len(report.replayed_ids),
                    job_ids=report.replayed_ids,
                )
    assert report is not None
    return report, audit_id


def purge_dead_letters(
    settings: Settings,
    queue: str,
    where: DeadLetterFilter,
    *,
    actor: str,
    dry_run: bool,
) -> tuple[PurgePlan, int]:
    """Delete the DLQ records older than ``where.until`` (the only filter a purge honours:
    see ``tenantq.dlq.purge``); returns the plan and the audit row's id."""
    validate_actor(actor)
    if not where.only_until:
        raise ConfigurationError(
            "purge deletes every record of a partition below an offset, so it takes --until "
            "and no other filter (Kafka cannot delete single records)"
        )
    assert where.until is not None
    plan = plan_purge(settings, queue, where.until)
    purged: dict[int, int] = {}
    try:
        if not dry_run:
            execute_purge(settings, plan, purged)
    finally:
        # A purge that failed in some partitions is audited with what it did delete.
        done = plan.cuts if dry_run else purged
        with connect(settings, autocommit=True, application_name="tenantq-dlq") as connection:
            audit_id = replay_store.replay_audit_insert(
                connection,
                actor=actor,
                queue=queue,
                action="purge",
                filter_=_audit_filter(where, None),
                dry_run=dry_run,
                matched=plan.records_in(done),
                replayed=0,
                job_ids=plan.job_ids_in(done),
            )
    return plan, audit_id


def _reader(settings: Settings, queue: str, where: DeadLetterFilter) -> DeadLetterReader:
    return DeadLetterReader(settings, queue, since=where.since, positions=where.positions)


def _matching(
    reader: DeadLetterReader,
    where: DeadLetterFilter,
    limit: int | None,
    on_scanned: Callable[[int], None] | None,
) -> Iterator[DeadLetter]:
    """The reader's records that match ``where``, streamed, at most ``limit`` (None or 0: all)."""
    matching = (record for record in reader.records(on_scanned) if where.matches(record))
    return itertools.islice(matching, limit) if limit else matching


def _audit_filter(where: DeadLetterFilter, limit: int | None) -> dict[str, object]:
    return {**where.as_json(), "limit": limit}
