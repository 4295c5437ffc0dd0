"""Guarantee: a tenant's limits are applied by running workers within a second of a change,
without a restart; jobs over the limit wait without spending an attempt and without holding up
the other tenants of their partition (they all start while the capped tenant still waits);
two workers (members of one group, in one process here) keep one cap between them; and clearing
the limit lets the rest run."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.quotas.tenants import Tenants
from tenantq.settings import QueueSettings

JOB_SECONDS = 0.3


def test_limits_apply_at_once_and_held_back_jobs_cost_nothing(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    # One partition: the capped tenant and the cold ones share it, and its read-ahead window.
    settings = make_settings(
        queues={"default": QueueSettings(partitions=1, retry_delays_seconds=[1.0, 2.0])},
        tenant_isolation={"hot_lane": False, "tenant_max_share": 1.0},
    )
    app = tenantq.App(settings)
    lock = threading.Lock()
    #: (tenant, attempt, began, ended) of every attempt, from the handler.
    attempts: list[tuple[str, int, float, float]] = []

    @app.job("export", max_attempts=3)
    def export(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        began = time.monotonic()
        time.sleep(payload["seconds"])
        with lock:
            attempts.append((ctx.tenant, ctx.attempt, began, time.monotonic()))

    def running_at(tenant: str, at: float) -> int:
        with lock:
            return sum(1 for t, _, b, e in attempts if t == tenant and b <= at < e)

    def ended(tenant: str) -> int:
        with lock:
            return sum(1 for t, _, _, _ in attempts if t == tenant)

    def most_running(tenant: str, since: float = 0.0) -> int:
        with lock:
            moments = [b for t, _, b, _ in attempts if t == tenant and b >= since]
        return max((running_at(tenant, at) for at in moments), default=0)

    tenants = Tenants(settings=settings)
    tenants.set("acme", max_running=2)
    with running_worker(app, settings, concurrency=8), running_worker(app, settings, concurrency=8):
        time.sleep(2.0)  # both members in the group, the limits read
        with tenantq.Producer(settings, app) as producer:
            capped = [
                {"job_type": "export", "tenant": "acme", "payload": {"seconds": JOB_SECONDS}}
                for _ in range(40)
            ]
            cold = [
                {"job_type": "export", "tenant": f"cold{n}", "payload": {"seconds": 0.05}}
                for n in range(12)
            ]
            # The capped tenant's backlog first, the cold tenants' jobs behind it.
            acme_ids = [ref.job_id for ref in producer.enqueue_batch(capped).result(60)]
            sent = time.monotonic()
            cold_ids = [ref.job_id for ref in producer.enqueue_batch(cold).result(60)]
        wait_for(lambda: all_in(db, cold_ids, {"succeeded"}), timeout=30, what="cold jobs")
        cold_done = time.monotonic() - sent
        acme_left = len(acme_ids) - sum(
            1 for state in _states(db, acme_ids) if state == "succeeded"
        )
        # The cold tenants did not wait for the capped backlog (40 x 0.3 s at 2 = 6 s).
        assert cold_done < 3.0 and acme_left >= 20, (cold_done, acme_left)
        # The handler notes an attempt when it ends: the cold jobs can all be done before the
        # first capped ones are, so let a few of those end before judging the cap by them.
        wait_for(lambda: ended("acme") >= 4, timeout=10, what="capped jobs ending")
        assert most_running("acme") == 2

        changed = time.monotonic()
        tenants.set("acme", max_running=6)
        wait_for(
            lambda: most_running("acme", changed) > 2, timeout=5, what="the raised cap applied"
        )
        with lock:
            began = [b for t, _, b, _ in attempts if t == "acme" and b >= changed]
        first_above = min(at for at in began if running_at("acme", at) > 2)
        assert first_above - changed < 1.5, first_above - changed

        tenants.clear("acme")
        wait_for(lambda: all_in(db, acme_ids, {"succeeded"}), timeout=60, what="acme done")

    # Held back any number of times, every job ran once, at its first attempt.
    with lock:
        assert sorted(attempt for _, attempt, _, _ in attempts) == [1] * 52
    rows = db.execute(
        "SELECT max(attempts) FROM tenantq_jobs WHERE deployment = %s", (settings.topic_prefix,)
    ).fetchone()
    assert rows == (1,)


def _states(db: psycopg.Connection[Any], ids: list[uuid.UUID]) -> list[str]:
    return [
        str(state)
        for (state,) in db.execute(
            "SELECT state FROM tenantq_jobs WHERE id = ANY(%s)", (ids,)
        ).fetchall()
    ]
