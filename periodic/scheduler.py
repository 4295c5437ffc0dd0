"""The periodic scheduler: a background service of every ``tenantq worker`` whose app has
schedules. Any number may run; each tick still makes exactly one job.

A round: read every schedule's ``next_tick`` and the database's clock (never the host's);
for each due schedule, in ONE transaction, compare-and-set ``next_tick`` forward
(``tenantq.store.periodic.PERIODIC_ADVANCE``) and, if this scheduler won, enqueue the tick's
job through the outbox. The job and the schedule's move commit together or not at all, so a
crash loses no tick and a losing scheduler writes nothing; the relay publishes the job.

| schedule was due at ``next_tick`` ...          | what this round does                   |
| ---------------------------------------------- | -------------------------------------- |
| ``catch_up=True``                              | enqueue ``next_tick``, move to the one |
|                                                | after it (missed ticks run one by one) |
| latest tick <= now is within the misfire grace | enqueue that tick, skip older ones     |
| latest tick is older than the grace            | enqueue nothing, move past now         |

A schedule whose definition changed (another interval or expression) starts again from now.
"""

from __future__ import annotations

import datetime as dt
import logging

from tenantq.app import App
from tenantq.background import ServiceLoop
from tenantq.errors import InvalidJobError
from tenantq.outbox.outbox import Outbox
from tenantq.producer.request import EnqueueRequest
from tenantq.schedules import Schedule, tick_text
from tenantq.settings import Settings
from tenantq.store import periodic as periodic_store
from tenantq.store.engine import DeploymentConnection, LazyConnection

log = logging.getLogger("tenantq.periodic")


class PeriodicScheduler(ServiceLoop):
    """Enqueues the ticks of ``app.schedules``; owns one connection and an ``Outbox``."""

    def __init__(self, app: App, settings: Settings, *, name: str = "periodic") -> None:
        super().__init__(name)
        self.app = app
        self.settings = settings
        self.schedules: dict[str, Schedule] = {}
        self._outbox = Outbox(app, settings=settings)
        self._database = LazyConnection(settings, "tenantq-periodic", on_open=self._register)
        #: Ticks this scheduler enqueued (for tests and logs).
        self.enqueued = 0

    def run_round(self) -> float:
        connection = self._database.get()
        next_ticks, now = periodic_store.periodic_next_ticks(connection, list(self.schedules))
        wait = self.settings.periodic.poll_interval_seconds
        for name, expected in next_ticks.items():
            if self.stopping:
                break
            if expected <= now:
                expected = self.fire(connection, self.schedules[name], expected, now)
            wait = min(wait, max(0.0, (expected - now).total_seconds()))
        return wait

    def fire(
        self,
        connection: DeploymentConnection,
        schedule: Schedule,
        expected: dt.datetime,
        now: dt.datetime,
    ) -> dt.datetime:
        """Advance a due schedule (and enqueue its tick) if no other scheduler did first;
        returns the schedule's next tick as this scheduler left it."""
        tick: dt.datetime | None
        if schedule.catch_up:
            tick = expected
            next_tick = schedule.next_after(expected)
        else:
            latest = schedule.latest_at_or_before(now)
            late = (now - latest).total_seconds()
            tick = latest if late <= self.settings.periodic.misfire_grace_seconds else None
            next_tick = schedule.next_after(now)
        deployment = self.settings.topic_prefix
        job_id = schedule.job_id(tick, deployment) if tick is not None else None
        with connection.transaction():
            won = periodic_store.periodic_advance(
                connection,
                name=schedule.name,
                expected=expected,
                next_tick=next_tick,
                tick=tick,
                job_id=job_id,
            )
            if won and tick is not None:
                self._outbox.enqueue_request(connection, self._request(schedule, tick))
                self.enqueued += 1
        if won and tick is None:
            log.info(
                "periodic %r: ticks missed while no worker ran are skipped (no catch_up); "
                "next %s", schedule.name, tick_text(next_tick),
            )  # fmt: skip
        return next_tick

    def _request(self, schedule: Schedule, tick: dt.datetime) -> EnqueueRequest:
        return EnqueueRequest(
            job_type=schedule.job_type,
            tenant=schedule.tenant,
            payload=schedule.payload,
            queue=schedule.queue,
            job_id=schedule.job_id(tick, self.settings.topic_prefix),
            idempotency_key=schedule.idempotency_key(tick),
        )

    def _register(self, connection: DeploymentConnection) -> None:
        """Upsert every valid schedule; one whose job would not validate is left out, with
        one error line, rather than failing every tick."""
        now_row = connection.execute("SELECT now()").fetchone()
        connection.commit()
        assert now_row is not None
        now: dt.datetime = now_row[0]
        self.schedules = {}
        for schedule in self.app.schedules.values():
            try:
                row = self._outbox.prepare(self._request(schedule, now))
            except InvalidJobError as error:
                log.error("periodic %r is not scheduled: %s", schedule.name, error)
                continue
            periodic_store.periodic_upsert(
                connection,
                name=schedule.name,
                job_type=schedule.job_type,
                tenant_id=schedule.tenant,
                queue=row.queue,
                schedule=schedule.spec,
                catch_up=schedule.catch_up,
                next_tick=schedule.next_after(now),
            )
            self.schedules[schedule.name] = schedule

    def reset(self) -> None:
        self._database.close()

    def close(self) -> None:
        self.reset()
        self._outbox.close()
