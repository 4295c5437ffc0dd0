"""The console with no servers behind it: pages say that PostgreSQL and Kafka are down (the
overview still renders; other pages answer 503 with the reason, never a 500), a console
without a token is read-only and refuses every POST with 401, the database password and the
token never appear in a page or an API answer, responses carry a strict CSP, and signing in
needs the database (sessions are rows there)."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient

import tenantq
from tenantq.settings import WebSettings
from tenantq.web.app import create_app

PASSWORD = "hunter2-db-password"
TOKEN = "token-that-must-not-leak"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings(token: str | None) -> tenantq.Settings:
    port = closed_port()
    return tenantq.Settings(
        kafka_bootstrap_servers=f"127.0.0.1:{port}",
        database_url=f"postgresql://tenantq:{PASSWORD}@127.0.0.1:{port}/tenantq",
        web=WebSettings(token=token, kafka_timeout_seconds=0.5),
    )


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(settings(TOKEN)), base_url="http://127.0.0.1:8765")


def test_overview_says_what_is_down(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "PostgreSQL is unavailable" in page.text
    assert "Kafka is unavailable" in page.text
    assert PASSWORD not in page.text and TOKEN not in page.text
    api = client.get("/api/queues").json()
    assert api["database"]["up"] is False and api["broker"]["up"] is False
    assert PASSWORD not in str(api)
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_pages_that_need_the_database_answer_503(client: TestClient) -> None:
    for path in ("/jobs", "/tenants", "/api/jobs/01a22ed1-d999-794b-937e-5e385837e4bf"):
        response = client.get(path)
        assert response.status_code == 503, path
        assert "PostgreSQL is unavailable" in response.text
        assert PASSWORD not in response.text
    assert client.get("/api/jobs/not-a-uuid").status_code == 404


def test_a_read_only_console_refuses_every_action() -> None:
    client = TestClient(create_app(settings(None)), base_url="http://127.0.0.1:8765")
    assert "read-only" in client.get("/login").text
    for path in ("/api/dlq/replay", "/api/jobs/01a22ed1-d999-794b-937e-5e385837e4bf/cancel"):
        response = client.post(path, json={"job_ids": ["x"]}, headers={"Authorization": "Bearer x"})
        assert response.status_code == 401, path
        assert "read-only" in response.json()["error"]


def test_actions_without_the_token_are_401(client: TestClient) -> None:
    response = client.post("/api/dlq/replay", json={"job_ids": ["x"], "dry_run": True})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    form = client.post("/jobs/01a22ed1-d999-794b-937e-5e385837e4bf/cancel", data={"csrf": "x"})
    assert form.status_code == 401 and "sign in" in form.text.lower()


def test_login_checks_csrf_and_token(client: TestClient) -> None:
    page = client.get("/login")
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    wrong = client.post("/login", data={"user": "alice", "token": "nope", "csrf": csrf})
    assert wrong.status_code == 401 and "does not match" in wrong.text
    forged = client.post("/login", data={"user": "alice", "token": TOKEN, "csrf": "forged"})
    assert forged.status_code == 403
    # The right token opens a session in PostgreSQL, which is down here: said, not a 500.
    down = client.post("/login", data={"user": "alice", "token": TOKEN, "csrf": csrf})
    assert down.status_code == 503 and "PostgreSQL is unavailable" in down.text
    assert "tenantq_session" not in down.cookies
