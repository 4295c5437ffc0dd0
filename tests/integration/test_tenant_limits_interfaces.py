"""Guarantee: tenants' limits are set, shown and cleared the same way from the CLI, from
Python (``tenantq.Tenants``), from the console's Tenants page and from its API, with what is
in use now (live leases counted); changing them needs the console token; bad input at every
door is a one-line error or a 4xx that says what is wrong and changes nothing, never a
traceback or a 500; and two deployments on one database never see each other's rows."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner
from web_console import console_settings, sign_in

import tenantq
from tenantq.cli import app as cli
from tenantq.errors import ConfigurationError
from tenantq.quotas.tenants import Tenants
from tenantq.store.engine import connect
from tenantq.web.app import create_app

TOKEN = "tenant-limits-token"
BEARER = {"Authorization": f"Bearer {TOKEN}", "X-Tenantq-Actor": "ops"}
BASE = "http://127.0.0.1"

#: (option values of ``tenants set``, a word the error must say).
BAD_SET = [
    (["--max-running", "0"], "max running"),
    (["--max-running", "2.5"], "whole number"),
    (["--max-running", "9" * 40], "whole number"),
    (["--rate", "nan"], "rate"),
    (["--rate", "inf"], "rate"),
    (["--rate", "-3"], "rate"),
    (["--rate", "1e400"], "rate"),
    (["--burst", "5"], "burst needs a rate"),
    (["--weight", "0"], "weight"),
    (["--weight", "1001"], "weight"),
    (["--queue", "nowhere", "--max-running", "3"], "not declared"),
    (["--job-type", "no spaces", "--max-running", "3"], "job type"),
    (["--job-type", "export", "--weight", "4"], "weight"),
]


def run(settings: tenantq.Settings, *arguments: str) -> Any:
    environment = {
        "TENANTQ_DATABASE_URL": settings.require_database_url(),
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
    }
    return CliRunner().invoke(cli, list(arguments), env=environment)


def lease(settings: tenantq.Settings, tenant: str, count: int) -> None:
    """``count`` live leases of ``tenant`` (jobs another worker runs), written as a claim
    would leave them."""
    with connect(settings, autocommit=True) as connection:
        for _ in range(count):
            connection.execute(
                "INSERT INTO tenantq_jobs (deployment, id, queue, job_type, tenant_id, "
                "partition_key, state, attempts, max_attempts, lease_owner, lease_until) "
                "VALUES (%s, %s, 'default', 'export', %s, %s, 'leased', 1, 3, 'elsewhere', "
                "now() + interval '1 minute')",
                (connection.deployment, uuid.uuid4(), tenant, tenant),
            )


def test_the_cli_sets_shows_and_clears_and_refuses_bad_input(
    settings: tenantq.Settings,
) -> None:
    done = run(settings, "tenants", "set", "acme", "--max-running", "5", "--rate", "40",
               "--burst", "10")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "at most 5 running" in done.output and "40 starts/s" in done.output
    assert (
        run(settings, "tenants", "set", "acme", "--queue", "default", "--weight", "4").exit_code
        == 0
    )
    lease(settings, "acme", 3)

    shown = run(settings, "tenants", "show", "acme", "--json")
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.output)
    wide = next(row for row in view["limits"] if row["queue"] == "*")
    assert (wide["max_running"], wide["rate"], wide["burst"], wide["running"]) == (5, 40.0, 10, 3)
    assert wide["updated_by"] and wide["burst_left"] == pytest.approx(10, abs=0.5)
    queue_row = next(row for row in view["limits"] if row["queue"] == "default")
    assert queue_row["weight"] == 4 and queue_row["running"] == 3
    every = json.loads(run(settings, "tenants", "show", "--json").output)
    assert {row["tenant"] for row in every["limits"]} == {"acme"}
    table = run(settings, "tenants", "show")
    assert table.exit_code == 0 and "3 / 5" in table.output

    # 'none' removes one limit and keeps the others.
    assert run(settings, "tenants", "set", "acme", "--rate", "none").exit_code == 0
    (wide,) = [r for r in Tenants(settings=settings).show("acme").rows if r.limit.queue == "*"]
    assert (wide.limit.max_running, wide.limit.rate, wide.limit.burst) == (5, None, None)

    for options, said in BAD_SET:
        failed = run(settings, "tenants", "set", "acme", *options)
        assert failed.exit_code != 0, options
        assert said in failed.output and "Traceback" not in failed.output, (options, failed.output)
    for tenant in ("bad tenant", "x" * 200, "a\x00b", ""):
        failed = run(settings, "tenants", "set", tenant, "--max-running", "3")
        assert failed.exit_code != 0 and "Traceback" not in failed.output, tenant
    assert run(settings, "tenants", "set", "acme").exit_code != 0  # nothing to set
    # Nothing the refused commands said was stored.
    rows = Tenants(settings=settings).show("acme").rows
    assert sorted((r.limit.queue, r.limit.max_running, r.limit.weight) for r in rows) == [
        ("*", 5, None),
        ("default", None, 4),
    ]

    cleared = run(settings, "tenants", "clear", "acme")
    assert cleared.exit_code == 0 and "2 row(s) removed" in cleared.output
    assert Tenants(settings=settings).show_all() == []
    view = json.loads(run(settings, "tenants", "show", "acme", "--json").output)
    assert view["limits"] == [] and view["default_use"]["running"] == 3


def test_python_api_checks_every_value(settings: tenantq.Settings) -> None:
    app = tenantq.App(settings)
    tenants = tenantq.Tenants(app)
    row = tenants.set("globex", max_running=10, weight=2)
    assert row is not None and (row.max_running, row.weight, row.rate) == (10, 2, None)
    for bad in (
        {"max_running": True},
        {"max_running": -1},
        {"max_running": [1]},
        {"rate": float("nan")},
        {"rate": "fast"},
        {"rate": {"a": 1}},
        {"weight": 10**9},
        {"burst": 3},
    ):
        with pytest.raises(ConfigurationError):
            tenants.set("globex", **bad)
    with pytest.raises(ConfigurationError):
        tenants.set("globex", queue=5, max_running=1)  # type: ignore[arg-type]
    assert tenants.set("globex", max_running=None, weight=None) is None  # nothing left
    assert tenants.show_all() == []


def test_the_console_shows_and_edits_limits_with_the_token_only(
    settings: tenantq.Settings,
) -> None:
    Tenants(settings=settings).set("acme", max_running=5)
    lease(settings, "acme", 2)
    client = TestClient(create_app(console_settings(settings, TOKEN)), base_url=BASE)
    csrf = sign_in(client, "alice", TOKEN)
    page = client.get("/tenants?queue=default")
    assert page.status_code == 200
    assert 'id="limits"' in page.text and 'data-tenant="acme" data-queue="*"' in page.text
    assert "2 / 5" in page.text and 'id="set-limits"' in page.text

    form = {"csrf": csrf, "page_queue": "default", "action": "set", "tenant": "initech",
            "queue": "default", "job_type": "", "max_running": "3", "rate": "20", "burst": "",
            "weight": ""}  # fmt: skip
    done = client.post("/tenants/limits", data=form)
    assert done.status_code == 200 and "limits set" in done.text
    (row,) = Tenants(settings=settings).show("initech").rows
    assert (row.limit.queue, row.limit.max_running, row.limit.rate) == ("default", 3, 20.0)
    assert row.limit.updated_by is not None and "alice" in row.limit.updated_by

    # Without the token (a fresh client) or without the CSRF token: refused, nothing changed.
    stranger = TestClient(create_app(console_settings(settings, TOKEN)), base_url=BASE)
    assert stranger.post("/tenants/limits", data={**form, "max_running": "99"}).status_code in (
        401,
        403,
    )
    no_csrf = {key: value for key, value in form.items() if key != "csrf"}
    assert client.post("/tenants/limits", data={**no_csrf, "max_running": "99"}).status_code in (
        401,
        403,
    )
    assert client.post(
        "/api/tenants/acme/limits", json={"max_running": 99}, headers={"X-Tenantq-Actor": "x"}
    ).status_code in (401, 403)
    # A read-only console (no token) shows the limits and no form.
    read_only = TestClient(create_app(console_settings(settings, None)), base_url=BASE)
    shown = read_only.get("/tenants?queue=default")
    assert 'id="limits"' in shown.text and 'id="set-limits"' not in shown.text
    assert read_only.post("/tenants/limits", data=form).status_code in (401, 403)

    hostile: list[dict[str, str]] = [
        {"max_running": "0"},
        {"max_running": "1e3"},
        {"max_running": "9" * 5000},
        {"rate": "nan"},
        {"rate": "-1"},
        {"rate": "inf"},
        {"burst": "5", "rate": ""},
        {"weight": "<script>"},
        {"tenant": "bad tenant"},
        {"tenant": "a\x00b"},
        {"tenant": "x" * 10_000},
        {"queue": "nowhere"},
        {"job_type": "a b"},
        {"job_type": "t", "weight": "3", "max_running": ""},
        {"action": "drop"},
    ]
    for change in hostile:
        refused = client.post("/tenants/limits", data={**form, **change})
        assert refused.status_code == 400, (change, refused.status_code)
        assert 'class="flash failed"' in refused.text, change
    assert client.post("/tenants/limits", data={**form, "page_queue": "nope"}).status_code == 404
    (row,) = Tenants(settings=settings).show("initech").rows
    assert (row.limit.max_running, row.limit.rate, row.limit.weight) == (3, 20.0, None)

    cleared = client.post("/tenants/limits", data={**form, "action": "clear"})
    assert cleared.status_code == 200 and "1 limit row(s) removed" in cleared.text
    assert Tenants(settings=settings).show("initech").rows == []


def test_the_api_sets_shows_and_clears_and_refuses_bad_input(
    settings: tenantq.Settings,
) -> None:
    client = TestClient(create_app(console_settings(settings, TOKEN)), base_url=BASE)
    done = client.post(
        "/api/tenants/acme/limits", json={"max_running": 5, "rate": 40, "burst": 10},
        headers=BEARER,
    )  # fmt: skip
    assert done.status_code == 200, done.text
    assert done.json()["limits"]["max_running"] == 5
    kept = client.post("/api/tenants/acme/limits", json={"weight": 4}, headers=BEARER).json()
    assert (kept["limits"]["max_running"], kept["limits"]["weight"]) == (5, 4)
    lease(settings, "acme", 1)
    shown = client.get("/api/tenants/acme/limits", headers=BEARER).json()
    assert shown["limits"][0]["running"] == 1 and shown["limits"][0]["updated_by"]
    listed = client.get("/api/tenants/limits", headers=BEARER).json()
    assert [row["tenant"] for row in listed["limits"]] == ["acme"]
    # Every answer shows a row alike: the list's row is the tenant's own, when it was set
    # included.
    assert listed["limits"] == shown["limits"] and kept["limits"]["updated_at"]

    bodies: list[Any] = [
        {"max_running": 0},
        {"max_running": "many"},
        {"max_running": [1, 2]},
        {"max_running": True},
        {"rate": None, "burst": 3},
        {"weight": 1.5},
        {"queue": 7, "max_running": 1},
        {"queue": "nowhere", "max_running": 1},
        {"job_type": "x" * 500, "max_running": 1},
        {"colour": "red"},
        {},
        [],
        "text",
    ]
    for body in bodies:
        refused = client.post("/api/tenants/acme/limits", json=body, headers=BEARER)
        assert refused.status_code == 400, (body, refused.status_code, refused.text)
    raw = client.post(
        "/api/tenants/acme/limits", content=b"{not json", headers={**BEARER,
        "Content-Type": "application/json"},
    )  # fmt: skip
    assert raw.status_code == 400
    for tenant in ("bad%20tenant", "x" * 300, "%00"):
        assert client.get(f"/api/tenants/{tenant}/limits", headers=BEARER).status_code in (
            400,
            404,
        )
        answer = client.post(f"/api/tenants/{tenant}/limits", json={"max_running": 1},
                             headers=BEARER)  # fmt: skip
        assert answer.status_code in (400, 404), tenant
    limits = Tenants(settings=settings).show("acme").rows[0].limit
    assert (limits.max_running, limits.rate, limits.burst, limits.weight) == (5, 40.0, 10, 4)

    cleared = client.post("/api/tenants/acme/limits/clear", headers=BEARER)
    assert cleared.status_code == 200 and len(cleared.json()["removed"]) == 1
    assert (
        client.post("/api/tenants/acme/limits/clear?queue=nope", headers=BEARER).status_code == 400
    )


def test_two_deployments_never_see_each_others_limits(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    first, second = make_settings(), make_settings()
    Tenants(settings=first).set("acme", max_running=5)
    Tenants(settings=second).set("acme", max_running=50, rate=10)
    lease(first, "acme", 2)
    assert [u.limit.max_running for u in Tenants(settings=first).show_all()] == [5]
    assert [u.running for u in Tenants(settings=first).show_all()] == [2]
    (other,) = Tenants(settings=second).show_all()
    assert (other.limit.max_running, other.running) == (50, 0)
    Tenants(settings=second).clear("acme")
    assert [u.limit.max_running for u in Tenants(settings=first).show_all()] == [5]
    stats = json.loads(run(second, "stats", "--json").output)
    assert stats["quotas"]["limits"] == []
    stats = json.loads(run(first, "stats", "--json").output)
    assert [(row["tenant"], row["running"]) for row in stats["quotas"]["limits"]] == [("acme", 2)]
    table = run(first, "stats")
    assert table.exit_code == 0 and "tenant quotas" in table.output and "2 / 5" in table.output
    rows = db.execute(
        "SELECT deployment, max_running FROM tenantq_tenants WHERE deployment IN (%s, %s)",
        (first.topic_prefix, second.topic_prefix),
    ).fetchall()
    assert rows == [(first.topic_prefix, 5)]
