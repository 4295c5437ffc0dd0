"""The console's guard: sessions are signed and expire, CSRF tokens are bound to their cookie,
and ``authorize`` follows its decision table (read-only, bearer, session + CSRF, origin)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tenantq.web.security import Guard, NotAllowed

TOKEN = SecretStr("correct horse battery staple")


def guard(token: SecretStr | None = TOKEN) -> Guard:
    return Guard(token, session_seconds=3600)


def authorize(g: Guard, **given: str | None) -> object:
    fields: dict[str, str | None] = {
        "authorization": None,
        "session_cookie": None,
        "csrf_nonce": None,
        "csrf_token": None,
        "origin": None,
        "host": "127.0.0.1:8765",
    }
    fields.update(given)
    return g.authorize(**fields)  # type: ignore[arg-type]


def test_sessions_are_signed_and_expire() -> None:
    g = guard()
    cookie = g.issue_session("alice", now=1000.0)
    assert g.session_user(cookie, now=1001.0) == "alice"
    assert g.session_user(cookie, now=1000.0 + 3601) is None
    forged = cookie.replace(cookie.split(".")[0], "Ym9i")  # "bob", old signature
    assert g.session_user(forged, now=1001.0) is None
    assert guard().session_user(cookie, now=1001.0) is None  # another console's key
    with pytest.raises(ValueError):
        g.issue_session("<script>")


def test_csrf_tokens_belong_to_their_nonce() -> None:
    g = guard()
    nonce = g.new_nonce()
    assert g.csrf_valid(nonce, g.csrf_token(nonce))
    assert not g.csrf_valid(g.new_nonce(), g.csrf_token(nonce))
    assert not g.csrf_valid(nonce, None)
    assert not g.csrf_valid(None, g.csrf_token(nonce))


def test_without_a_token_every_action_is_refused() -> None:
    g = guard(None)
    assert g.read_only and not g.token_matches("")
    with pytest.raises(NotAllowed) as refused:
        authorize(g, authorization="Bearer anything")
    assert refused.value.status == 401 and "read-only" in refused.value.reason
    assert guard(SecretStr("")).read_only


def test_bearer_token_and_actor_hint() -> None:
    g = guard()
    actor = authorize(g, authorization=f"Bearer {TOKEN.get_secret_value()}", actor_hint="cron")
    assert actor.audit_name == "web:cron"  # type: ignore[attr-defined]
    anonymous = authorize(g, authorization=f"Bearer {TOKEN.get_secret_value()}")
    assert anonymous.audit_name == "web:api"  # type: ignore[attr-defined]
    for wrong in ("Bearer nope", f"Basic {TOKEN.get_secret_value()}", "Bearer "):
        with pytest.raises(NotAllowed) as refused:
            authorize(g, authorization=wrong)
        assert refused.value.status == 401


def test_session_needs_a_matching_csrf_token() -> None:
    g = guard()
    cookie, nonce = g.issue_session("alice"), g.new_nonce()
    actor = authorize(g, session_cookie=cookie, csrf_nonce=nonce, csrf_token=g.csrf_token(nonce))
    assert actor.audit_name == "web:alice"  # type: ignore[attr-defined]
    with pytest.raises(NotAllowed) as stale:
        authorize(g, session_cookie=cookie, csrf_nonce=nonce, csrf_token="forged")
    assert stale.value.status == 403
    with pytest.raises(NotAllowed) as nobody:
        authorize(g, csrf_nonce=nonce, csrf_token=g.csrf_token(nonce))
    assert nobody.value.status == 401


def test_cross_origin_posts_are_refused() -> None:
    g = guard()
    with pytest.raises(NotAllowed) as refused:
        authorize(
            g,
            authorization=f"Bearer {TOKEN.get_secret_value()}",
            origin="https://evil.example",
        )
    assert refused.value.status == 403
    same = authorize(
        g, authorization=f"Bearer {TOKEN.get_secret_value()}", origin="http://127.0.0.1:8765"
    )
    assert same.via == "token"  # type: ignore[attr-defined]
