"""Guarantee: the console's JSON API and actions work on the real stack. ``GET /api/queues``
reports the queue's counts and Kafka backlog; ``GET /api/jobs/{id}`` answers 404 for an
unknown job; ``GET /api/dlq`` filters like the CLI; ``POST /api/dlq/replay`` is refused
without the token, previews with ``dry_run`` and replays with the CLI's engine (audit rows name
``web:<actor>``); run-again makes a scheduled job run now, cancel cancels, placement actions
write the placement table; and job pages escape what jobs carry."""

from __future__ import annotations

from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, audit_rows, fill_dlq
from fastapi.testclient import TestClient
from support import all_in, running_worker, wait_for
from web_console import console_settings

import tenantq
from tenantq.store.engine import connect
from tenantq.store.placement import placement_list
from tenantq.web.app import create_app

TOKEN = "api-token-for-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}", "X-Tenantq-Actor": "script"}
HOSTILE = "<script>alert(1)</script>"


def _count(db: psycopg.Connection[Any], deployment: str, where: str) -> int:
    row = db.execute(
        "SELECT count(*) FROM tenantq_jobs"
        f" WHERE deployment = %s AND queue = 'default' AND {where}",
        (deployment,),
    )
    found = row.fetchone()
    assert found is not None
    return int(found[0])


def test_api_reads_replays_and_acts(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    jobs = [
        {"job_type": "charge", "tenant": "acme", "payload": {"fail": True, "note": HOSTILE}},
        {"job_type": "charge", "tenant": "globex", "payload": {"fail": True, "i": 1}},
        {"job_type": "export", "tenant": "globex", "payload": {"fail": False, "i": 2}},
    ]
    acme_dead, globex_dead, _ = fill_dlq(flaky, settings, db, jobs)
    # A job written through the outbox and not yet relayed (no relay runs until the worker).
    with tenantq.Outbox(flaky.app) as outbox, db.transaction():
        outbox.enqueue(db, "export", tenant="initech", payload={"fail": False, "i": 3})
    client = TestClient(create_app(console_settings(settings, TOKEN)), base_url="http://127.0.0.1")

    (queue,) = client.get("/api/queues").json()["queues"]
    assert queue["queue"] == "default"
    # Every test's queue is "default", in the session's one database: the console counts its
    # own deployment's jobs (this test's topic prefix), and nobody else's.
    deployment = settings.topic_prefix
    assert (
        queue["jobs"]["dead_last_hour"]
        == _count(db, deployment, "state = 'dead' AND finished_at > now() - interval '1 hour'")
        == 2
    )
    assert (
        queue["jobs"]["depth"]
        == _count(db, deployment, "state IN ('pending', 'runnable', 'leased', 'retrying')")
        == 1
    )
    assert queue["dlq_records"] == 2 and queue["consumer_lag"] == 0
    assert len(queue["retry_tiers"]) == 3
    unsent = db.execute(
        "SELECT count(*) FROM tenantq_outbox WHERE deployment = %s AND queue = 'default'",
        (deployment,),
    ).fetchone()
    assert unsent == (1,)
    assert queue["outbox"]["unsent"] == unsent[0] and queue["outbox"]["oldest_age_seconds"] >= 0
    assert 'data-k="outbox"' in client.get("/").text

    assert client.get("/api/jobs/01a22ed1-0000-7000-8000-000000000000").status_code == 404
    job = client.get(f"/api/jobs/{acme_dead}").json()
    assert job["job"]["state"] == "dead" and job["job"]["payload"]["note"] == HOSTILE
    assert [attempt["outcome"] for attempt in job["attempts"]] == ["dead"]
    page = client.get(f"/jobs/{acme_dead}").text
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page

    letters = client.get("/api/dlq", params={"tenant": "acme"}).json()["letters"]
    assert [letter["job_id"] for letter in letters] == [str(acme_dead)]
    assert letters[0]["job_state"] == "dead"
    assert client.get("/api/dlq", params={"since": "yesterday"}).status_code == 400

    body = {"job_ids": [str(acme_dead), str(globex_dead)], "dry_run": True}
    assert client.post("/api/dlq/replay", json=body).status_code == 401
    bad = dict(BEARER, Authorization="Bearer wrong")
    assert client.post("/api/dlq/replay", json=body, headers=bad).status_code == 401
    preview = client.post("/api/dlq/replay", json=body, headers=BEARER).json()
    assert preview["matched"] == 2 and len(preview["replayed"]) == 2 and preview["dry_run"]
    assert all_in(db, [acme_dead, globex_dead], {"dead"})

    flaky.fixed.set()
    with running_worker(flaky.app, settings, concurrency=4):
        done = client.post("/api/dlq/replay", json={**body, "dry_run": False}, headers=BEARER)
        assert done.status_code == 200 and sorted(done.json()["replayed"]) == sorted(
            body["job_ids"]
        )
        wait_for(lambda: all_in(db, [acme_dead, globex_dead], {"succeeded"}), timeout=30)
        again = client.post("/api/dlq/replay", json={**body, "dry_run": False}, headers=BEARER)
        assert again.json()["skipped"] == {"job is succeeded": 2}

        # Run again now: a job scheduled ten minutes out runs at once.
        with tenantq.Producer(settings, flaky.app) as producer:
            later = producer.enqueue("export", tenant="initech", payload={"i": 3}, delay=600)
            scheduled = later.result(30).job_id
            doomed = producer.enqueue("export", tenant="initech", payload={"i": 4}, delay=600)
            canceled = doomed.result(30).job_id
        wait_for(lambda: all_in(db, [scheduled, canceled], {"pending"}), timeout=10)
        ran = client.post(f"/api/jobs/{scheduled}/run", headers=BEARER)
        assert ran.status_code == 200, ran.text
        wait_for(lambda: all_in(db, [scheduled], {"succeeded"}), timeout=30, what="run now")
        assert client.post(f"/api/jobs/{scheduled}/run", headers=BEARER).status_code == 409
        cancel = client.post(f"/api/jobs/{canceled}/cancel", headers=BEARER)
        assert cancel.status_code == 200 and "canceled" in cancel.json()["result"]
        assert all_in(db, [canceled], {"canceled"})

    audits = audit_rows(db, ["web:script"])
    assert [row[:5] for row in audits] == [
        ("web:script", "replay", True, 2, 2),
        ("web:script", "replay", False, 2, 2),
        ("web:script", "replay", False, 2, 0),
    ]

    # Placement through the Tenants page's form, with the token instead of a session.
    form = {"queue": "default", "tenant": "acme", "action": "pin", "partitions": "1,2"}
    assert client.post("/tenants/placement", data=form).status_code == 401
    pinned = client.post("/tenants/placement", data=form, headers=BEARER)
    assert pinned.status_code == 200 and "pinned to 1,2" in pinned.text
    with connect(settings, autocommit=True) as scoped:
        (record,) = [r for r in placement_list(scoped, "default") if r.tenant_id == "acme"]
    assert (record.mode, record.partitions, record.updated_by) == ("pinned", (1, 2), "web:script")
    wrong = client.post("/tenants/placement", data={**form, "partitions": "99"}, headers=BEARER)
    assert wrong.status_code == 400 and "do not exist" in wrong.text
    release = {"queue": "default", "tenant": "acme", "action": "release"}
    assert client.post("/tenants/placement", data=release, headers=BEARER).status_code == 200
    with connect(settings, autocommit=True) as scoped:
        assert not [r for r in placement_list(scoped, "default") if r.tenant_id == "acme"]
