"""Guarantee: the console holds against a hostile caller. Wrong tokens are counted per client
and overall: the 21st from one address within a minute, and the 301st from everyone, is
refused unread (429 with Retry-After, even when right), logged once and counted in
``/metrics``, while a signed-in session keeps working; an unauthenticated body is refused
before a byte of it is read, however large it claims to be, and an authenticated one past the
limit gets 413; a Host the console does not answer to gets 400 (DNS rebinding); cookies are
HttpOnly, SameSite=Strict, and Secure behind a trusted https proxy only; bad input anywhere
(ids, dates, numbers, NUL bytes, huge values, an invalid actor) gets a bounded 4xx, and every
answer, a 500 included, carries the security headers; a short token stops ``tenantq web``
from serving beyond localhost, and an empty one is read-only, as the start line says."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from support import free_port, sample_value
from web_console import consoles, csrf_of, serving, sign_in

import tenantq
from tenantq.settings import WebSettings
from tenantq.web.errors import SECURITY_HEADERS

TOKEN = "hardening-token-for-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
BASE = "http://127.0.0.1:8765"
UNKNOWN_JOB = "01a22ed1-0000-7000-8000-000000000000"
#: A body that claims to be 300 MB.
HUGE = 300 * 1024 * 1024
PROXY = "10.255.0.1"


@pytest.fixture
def console() -> Iterator[Callable[..., FastAPI]]:
    """Makes consoles on a settings' servers (web settings as keywords), closed afterwards."""
    with consoles(TOKEN) as make:
        yield make


@pytest.fixture
def client(settings: tenantq.Settings, console: Callable[..., FastAPI]) -> TestClient:
    """A client of a console with the default web settings."""
    return TestClient(console(settings), base_url=BASE)


def assert_secured(response: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)


# -- the failed-login limiter ----------------------------------------------------------------


def test_wrong_tokens_are_limited_logged_and_counted(
    settings: tenantq.Settings,
    console: Callable[..., FastAPI],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = console(settings, trusted_proxies=[f"{PROXY}/32"])
    caplog.set_level(logging.WARNING, logger="tenantq.web")
    oncall = TestClient(app, base_url=BASE, client=(PROXY, 40000))
    csrf = sign_in(oncall, "oncall", TOKEN)

    def from_client(number: int, token: str) -> Any:
        headers = {
            "Authorization": f"Bearer {token}",
            "X-Forwarded-For": f"198.18.{number // 250}.{number % 250 + 1}",
        }
        return oncall.post(f"/api/jobs/{UNKNOWN_JOB}/cancel", headers=headers)

    # One address: twenty wrong tokens are heard, the 21st is refused even though right.
    one = TestClient(app, base_url=BASE, client=("203.0.113.5", 40000))
    for _ in range(20):
        assert (
            one.post(
                f"/api/jobs/{UNKNOWN_JOB}/cancel", headers={"Authorization": "Bearer guess"}
            ).status_code
            == 401
        )
    refused = one.post(f"/api/jobs/{UNKNOWN_JOB}/cancel", headers=BEARER)
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    assert_secured(refused)
    form = csrf_of(one.get("/login").text)
    login = one.post("/login", data={"user": "x", "token": TOKEN, "csrf": form})
    assert login.status_code == 429 and "too many wrong tokens" in login.text
    # A header the client wrote itself does not make it someone else.
    spoofed = {**BEARER, "X-Forwarded-For": "192.0.2.77"}
    assert one.post(f"/api/jobs/{UNKNOWN_JOB}/cancel", headers=spoofed).status_code == 429

    # Everyone: 280 more wrong tokens from 280 addresses behind the trusted proxy make 300;
    # the 301st, from a new address and right, is refused.
    statuses = [from_client(number, "guess").status_code for number in range(280)]
    assert set(statuses) == {401}
    last = from_client(999, TOKEN)
    assert last.status_code == 429 and "retry-after" in last.headers
    # A session signed in before keeps working (404: the job is unknown, the actor was not).
    assert oncall.post(f"/jobs/{UNKNOWN_JOB}/cancel", data={"csrf": csrf}).status_code == 404

    events = [json.loads(json.dumps(record.__dict__, default=str)) for record in caplog.records]
    failed = [event for event in events if event["msg"] == "web.login.failed"]
    refusals = [event for event in events if event["msg"] == "web.login.refused"]
    assert len(failed) == 300 and failed[0]["client"] == "203.0.113.5"
    assert [(event["client"], event["limit"]) for event in refusals] == [
        ("203.0.113.5", "client"),
        ("198.18.3.250", "overall"),
    ]
    assert all(TOKEN not in str(event) and "guess" not in str(event) for event in events)
    metrics = oncall.get("/metrics").text
    assert sample_value(metrics, "tenantq_web_login_failures_total", via="bearer") == 300
    assert sample_value(metrics, "tenantq_web_logins_refused_total", limit="client") == 3
    assert sample_value(metrics, "tenantq_web_logins_refused_total", limit="overall") == 1


# -- bodies ----------------------------------------------------------------------------------


class StreamedBody:
    """An ASGI ``receive`` that hands out ``total`` bytes in 64 KiB chunks, counting them."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.read = 0

    async def __call__(self) -> dict[str, Any]:
        chunk = min(65_536, self.total - self.read)
        self.read += chunk
        return {"type": "http.request", "body": b"x" * chunk, "more_body": self.read < self.total}


async def call(app: FastAPI, path: str, body: StreamedBody, headers: dict[str, str]) -> int:
    """POST ``path`` to ``app`` as uvicorn would; the status answered."""
    answer: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.append(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode())
            for k, v in {"host": "127.0.0.1:8765", **headers}.items()
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8765),
    }
    await app(scope, body, send)  # type: ignore[arg-type]
    return answer[0]


def test_bodies_are_refused_before_they_are_read(
    settings: tenantq.Settings, console: Callable[..., FastAPI]
) -> None:
    app = console(settings)

    def status(path: str, body: StreamedBody, headers: dict[str, str]) -> int:
        return asyncio.run(call(app, path, body, headers))

    json_type = {"content-type": "application/json"}
    declared = {**json_type, "content-length": str(HUGE)}
    nobody = StreamedBody(HUGE)
    assert status("/api/dlq/replay", nobody, declared) == 401
    assert nobody.read == 0
    # Authenticated, past the limit: refused on what it declares, or as it streams.
    claimed = StreamedBody(HUGE)
    assert status("/api/dlq/replay", claimed, {**declared, **BEARER}) == 413
    assert claimed.read == 0
    streamed = StreamedBody(HUGE)
    assert status("/api/dlq/replay", streamed, {**json_type, **BEARER}) == 413
    assert streamed.read <= 1_048_576 + 65_536
    form = StreamedBody(1_000_000)
    form_type = {"content-type": "application/x-www-form-urlencoded"}
    assert status("/login", form, form_type) == 413
    assert form.read <= 16_384 + 65_536


def test_a_real_server_answers_an_unauthenticated_huge_body_at_once(
    settings: tenantq.Settings,
) -> None:
    web = WebSettings(token=TOKEN)
    with serving(settings.model_copy(update={"web": web})) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(
                b"POST /api/dlq/replay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {HUGE}\r\n\r\n".encode()
                + b'{"job_ids": ["'
            )
            started = time.monotonic()
            head = connection.recv(4096).decode(errors="replace")
        assert head.startswith("HTTP/1.1 401"), head
        assert time.monotonic() - started < 5
        assert "server: uvicorn" not in head.lower()


# -- hosts and cookies -----------------------------------------------------------------------


def test_only_allowed_hosts_are_answered(
    settings: tenantq.Settings, console: Callable[..., FastAPI], client: TestClient
) -> None:
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
        assert client.get("/login", headers={"Host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", ""):
        rebound = client.get("/api/queues", headers={"Host": host})
        assert rebound.status_code == 400 and "does not answer" in rebound.json()["error"], host
        assert_secured(rebound)
    named = TestClient(
        console(settings, allowed_hosts=["oncall.example.com"]),
        base_url="http://oncall.example.com",
    )
    assert named.get("/login").status_code == 200
    assert named.get("/login", headers={"Host": "127.0.0.1"}).status_code == 400


def test_cookies_are_strict_and_secure_behind_a_trusted_https_proxy(
    settings: tenantq.Settings, console: Callable[..., FastAPI]
) -> None:
    app = console(settings, trusted_proxies=[f"{PROXY}/32"])
    https = {"X-Forwarded-Proto": "https"}
    direct = TestClient(app, base_url=BASE, client=("192.0.2.10", 40000))
    cookie = direct.get("/login", headers=https).headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    proxied = TestClient(app, base_url=BASE, client=(PROXY, 40000), headers=https)
    page = proxied.get("/login")
    nonce_cookie = page.headers["set-cookie"]
    assert nonce_cookie.startswith("tenantq_csrf=") and nonce_cookie.endswith("; Secure")
    # The client speaks plain http to the console here, so its jar keeps a Secure cookie to
    # itself: send it by hand, as a browser talking https to the proxy would.
    form = {"user": "oncall", "token": TOKEN, "csrf": csrf_of(page.text)}
    cookie = {"Cookie": nonce_cookie.split(";")[0]}
    signed_in = proxied.post("/login", data=form, headers=cookie, follow_redirects=False)
    session = signed_in.headers["set-cookie"]
    assert session.startswith("tenantq_session=") and "HttpOnly" in session
    assert "SameSite=Strict" in session and session.endswith("; Secure")


# -- bad input -------------------------------------------------------------------------------

JOB_PAGES = [
    ("GET", "/api/jobs?since=99999999d", 400),
    ("GET", "/api/jobs?until=9999-12-31T23:59:59-14:00", 400),
    ("GET", "/jobs?since=99999999d", 400),
    ("GET", "/api/jobs?tenant=%00", 400),
    ("GET", "/jobs?tenant=%00", 400),
    ("GET", "/api/jobs?queue=a%00b&job_type=x", 400),
    ("GET", "/api/jobs?state=bogus", 400),
    ("GET", "/api/jobs?limit=0", 422),
    ("GET", "/api/jobs?limit=" + "9" * 5000, 422),
    ("GET", "/api/dlq?since=99999999d", 400),
    ("GET", "/dlq?since=99999999d", 400),
    ("GET", "/api/tenants?queue=%00", 400),
    ("GET", "/tenants?window=x", 422),
    ("GET", "/api/jobs/" + "a" * 5000, 404),
    ("GET", "/jobs/%00", 400),
    ("GET", "/login?next=%00", 400),
]


@pytest.mark.parametrize(("method", "path", "status"), JOB_PAGES)
def test_bad_input_in_urls_is_a_bounded_4xx(
    client: TestClient, method: str, path: str, status: int
) -> None:
    answer = client.request(method, path)
    assert answer.status_code == status, answer.text[:300]
    assert_secured(answer)
    assert len(answer.content) < (3_000 if path.startswith("/api/") else 20_000)
    if path.startswith("/api/"):
        assert answer.json()["error"]


def replay_body(**fields: Any) -> str:
    """A replay request of the unknown job with ``fields``; a value ``"1e400"`` is written as
    the bare number (JSON allows it; Python reads it as infinity)."""
    text = json.dumps({"job_ids": [UNKNOWN_JOB], **fields})
    return text.replace('"1e400"', "1e400")


REPLAY_BODIES = [
    (replay_body(rate=float("nan")), 422, "rate"),
    (replay_body(rate=float("inf")), 422, "rate"),
    (replay_body(rate="1e400"), 422, "rate"),
    (replay_body(canary="1e400"), 422, "canary"),
    (replay_body(canary=99_999_999_999), 422, "canary"),
    (replay_body(job_ids=[]), 422, "job_ids"),
    (replay_body(queue="q" * 100_000), 422, "queue"),
    (replay_body(job_ids=["x" * 900_000]), 422, "job_ids.0"),
    (replay_body(job_ids=["not-a-job"]), 400, "not a UUID"),
    ('{"job_ids": [', 422, "not valid JSON"),
    (replay_body(queue="nope"), 400, "not declared"),
]


@pytest.mark.parametrize(("body", "status", "named"), REPLAY_BODIES)
def test_bad_replay_requests_are_a_bounded_4xx(
    client: TestClient, body: str, status: int, named: str
) -> None:
    answer = client.post(
        "/api/dlq/replay",
        content=body.encode(),
        headers={**BEARER, "Content-Type": "application/json"},
    )
    assert answer.status_code == status, answer.text[:300]
    assert named in answer.json()["error"] and len(answer.content) < 1_000
    assert_secured(answer)


def test_bad_input_in_actions_is_a_4xx(
    settings: tenantq.Settings, console: Callable[..., FastAPI]
) -> None:
    app = console(settings)
    client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
    actors: list[str | bytes] = ["<b>x</b>", "a\u00e9".encode(), "x" * 65, "web:root", ""]
    for actor in actors:
        refused = client.post(
            f"/api/jobs/{UNKNOWN_JOB}/cancel", headers={**BEARER, "X-Tenantq-Actor": actor}
        )
        assert refused.status_code == 400 and "X-Tenantq-Actor" in refused.json()["error"]
    known = client.post(
        f"/api/jobs/{UNKNOWN_JOB}/cancel", headers={**BEARER, "X-Tenantq-Actor": "cron"}
    )
    assert known.status_code == 404
    replay = {"queue": "default", "job_id": UNKNOWN_JOB, "dry_run": "1"}
    for rate in ("nan", "inf", "-1", "1e400"):
        answer = client.post("/dlq/replay", data={**replay, "rate": rate}, headers=BEARER)
        assert answer.status_code == 400 and "rate" in answer.text, rate
    placement = {"queue": "default", "tenant": "acme", "action": "spread", "shards": "9" * 40}
    assert client.post("/tenants/placement", data=placement, headers=BEARER).status_code == 400
    assert client.post("/nowhere", headers=BEARER).status_code == 404
    # The last resort: a route that fails still answers with the security headers.

    def failing() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/api/fails", failing)
    failed = client.get("/api/fails")
    assert failed.status_code == 500 and "a bug" not in failed.text
    assert_secured(failed)


# -- starting the console --------------------------------------------------------------------


def start(environment: dict[str, str], *arguments: str) -> tuple[int | None, str]:
    """``tenantq web`` with ``environment``; its exit status (None: it was serving, and was
    stopped once it said so) and what it printed until then."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
    env.update(environment)
    command = [sys.executable, "-m", "tenantq.cli", "web", "--port", str(free_port()), *arguments]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    printed = ""
    try:
        for line in process.stderr:
            printed += line
            if "tenantq console on" in line:
                return None, printed
        return process.wait(30), printed
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)


def test_start_refuses_a_short_token_beyond_localhost_and_says_what_it_serves(
    settings: tenantq.Settings,
) -> None:
    servers = {
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
        "TENANTQ_DATABASE_URL": settings.require_database_url(),
    }
    status, output = start({**servers, "TENANTQ_WEB__TOKEN": "tiny-tok"}, "--host", "0.0.0.0")
    assert status == 2 and output.count("\n") == 1, output
    assert "at least 16" in output and "tiny-tok" not in output
    status, output = start({**servers, "TENANTQ_WEB__TOKEN": ""})
    assert status is None and "read-only" in output, output
    status, output = start({**servers, "TENANTQ_WEB__TOKEN": "tiny-tok"})
    assert status is None and "acceptable on localhost only" in output, output
    assert "tiny-tok" not in output and "actions need the token" in output
