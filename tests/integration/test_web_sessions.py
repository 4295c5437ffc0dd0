"""Guarantee: a console sign-in is a row in PostgreSQL. Signing out ends it server-side: a
saved copy of the cookie no longer cancels a job (401), in this console process and in any
other on the same database; a session outlives a restart of the console, ends by itself when
``session_hours`` are up, is not accepted by a console of another topic prefix or with a new
token, and its forms' CSRF tokens are bound to it (another session's token, or the one from
before signing in, is refused with 403)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from support import all_in, count_of, wait_for
from web_console import consoles, csrf_of, sign_in

import tenantq

TOKEN = "session-token-for-tests"
BASE = "http://127.0.0.1:8765"
TENANT = f"sessions-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def console() -> Iterator[Callable[..., FastAPI]]:
    """Makes console processes of their own on a settings' database and prefix (web settings
    as keywords); their connections are closed after the test."""
    with consoles(TOKEN) as make:
        yield make


def browser(app: FastAPI, cookies: dict[str, str] | None = None) -> TestClient:
    """A browser on ``app``, with ``cookies`` (a saved copy of another's) if given."""
    return TestClient(app, base_url=BASE, cookies=cookies)


def scheduled_jobs(
    settings: tenantq.Settings, db: psycopg.Connection[Any], count: int
) -> list[uuid.UUID]:
    with tenantq.Producer(settings) as producer:
        refs = [
            producer.enqueue("export", tenant=TENANT, payload={"i": i}, delay=600)
            for i in range(count)
        ]
        ids = [ref.result(30).job_id for ref in refs]
    wait_for(lambda: all_in(db, ids, {"pending"}), timeout=10, what="scheduled jobs written")
    return ids


def signed_in_as(app: FastAPI, cookies: dict[str, str]) -> str | None:
    page = browser(app, cookies).get("/login").text
    return page.split('<b id="user">')[1].split("<")[0] if '<b id="user">' in page else None


def sessions_of(db: psycopg.Connection[Any], prefix: str) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_web_sessions WHERE deployment = %s",
        (prefix,),
    )


def test_signing_out_ends_the_session_in_every_console_process(
    settings: tenantq.Settings, db: psycopg.Connection[Any], console: Callable[..., FastAPI]
) -> None:
    first, second = scheduled_jobs(settings, db, 2)
    this_process, other_process = console(settings), console(settings)
    oncall = browser(this_process)
    csrf = sign_in(oncall, "oncall", TOKEN)
    saved = dict(oncall.cookies)
    assert sessions_of(db, settings.topic_prefix) == 1

    # Another console process on the same database, and one started after a restart, know it.
    assert signed_in_as(other_process, saved) == "oncall"
    canceled = browser(other_process, saved).post(f"/jobs/{first}/cancel", data={"csrf": csrf})
    assert canceled.status_code == 200 and "canceled" in canceled.text
    assert signed_in_as(console(settings), saved) == "oncall"

    signed_out = oncall.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    assert signed_out.status_code == 303
    assert "Max-Age=0" in signed_out.headers["set-cookie"]
    assert sessions_of(db, settings.topic_prefix) == 0

    # The saved cookie acts nowhere any more.
    for app in (this_process, other_process, console(settings)):
        replayed = browser(app, saved).post(f"/jobs/{second}/cancel", data={"csrf": csrf})
        assert replayed.status_code == 401, replayed.text
        assert signed_in_as(app, saved) is None
    assert all_in(db, [second], {"pending"})


def test_sessions_expire_and_belong_to_their_token_and_prefix(
    settings: tenantq.Settings, console: Callable[..., FastAPI]
) -> None:
    brief = console(settings, session_hours=4 / 3600)
    visitor = browser(brief)
    sign_in(visitor, "brief", TOKEN)
    signed_in_at = time.monotonic()
    saved = dict(visitor.cookies)
    assert signed_in_as(brief, saved) == "brief"
    time.sleep(max(0.0, signed_in_at + 4.5 - time.monotonic()))
    assert signed_in_as(brief, saved) is None

    oncall = browser(console(settings))
    sign_in(oncall, "oncall", TOKEN)
    saved = dict(oncall.cookies)
    # A console with a new token (rotated after a leak) does not accept the old cookie.
    assert signed_in_as(console(settings, token="a-rotated-token-for-tests"), saved) is None
    # Nor does a console of another deployment on the same database.
    neighbour = settings.model_copy(update={"topic_prefix": f"{settings.topic_prefix}-other"})
    assert signed_in_as(console(neighbour), saved) is None
    assert signed_in_as(console(settings), saved) == "oncall"


def test_form_tokens_are_bound_to_their_session(
    settings: tenantq.Settings, db: psycopg.Connection[Any], console: Callable[..., FastAPI]
) -> None:
    (job,) = scheduled_jobs(settings, db, 1)
    app = console(settings)
    alice, bob = browser(app), browser(app)
    before_sign_in = csrf_of(alice.get("/login").text)
    alice_csrf = sign_in(alice, "alice", TOKEN)
    bob_csrf = sign_in(bob, "bob", TOKEN)
    assert alice_csrf != before_sign_in
    for wrong in (bob_csrf, before_sign_in, ""):
        refused = alice.post(f"/jobs/{job}/cancel", data={"csrf": wrong})
        assert refused.status_code == 403, wrong
    assert all_in(db, [job], {"pending"})
    # A script's header works the same as the form field.
    done = alice.post(f"/jobs/{job}/cancel", headers={"X-CSRF-Token": alice_csrf})
    assert done.status_code == 200 and "(by alice)" in done.text
    # Signing in again ends the browser's previous session.
    before = dict(alice.cookies)
    sign_in(alice, "alice", TOKEN)
    assert signed_in_as(app, before) is None
    assert signed_in_as(app, dict(alice.cookies)) == "alice"
