"""The console's guard: session cookies are signed under a key derived from the token (a new
token invalidates them, a restart does not), CSRF tokens are bound to a session or a nonce,
bearer requests follow the decision table (wrong token 401, invalid actor 400), origins are
checked, and cookies carry HttpOnly, SameSite=Strict and, over https, Secure."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tenantq.web.security import (
    Guard,
    NotAllowed,
    cookie_header,
    nonce_binding,
    session_binding,
)

TOKEN = SecretStr("correct horse battery staple")


def test_session_cookies_are_signed_by_the_token() -> None:
    guard = Guard(TOKEN)
    cookie = guard.session_cookie("abc123")
    assert guard.session_id_of(cookie) == "abc123"
    # The same token after a restart reads it; another token does not.
    assert Guard(TOKEN).session_id_of(cookie) == "abc123"
    assert Guard(SecretStr("another token, rotated")).session_id_of(cookie) is None
    forged = "abc124." + cookie.split(".")[1]
    assert guard.session_id_of(forged) is None
    for garbage in ("", "abc123", ".", "a" * 300, "abc123.sig\x00", "é.x"):
        assert guard.session_id_of(garbage) is None
    assert Guard(None).session_id_of(cookie) is None


def test_csrf_tokens_belong_to_their_session_or_nonce() -> None:
    guard = Guard(TOKEN)
    mine, other = session_binding("s1"), session_binding("s2")
    assert guard.csrf_valid(mine, guard.csrf_token(mine))
    assert not guard.csrf_valid(other, guard.csrf_token(mine))
    nonce = nonce_binding(guard.new_nonce())
    assert not guard.csrf_valid(mine, guard.csrf_token(nonce or ""))
    assert not guard.csrf_valid(mine, None)
    assert not guard.csrf_valid(None, guard.csrf_token(mine))
    assert nonce_binding(None) is None
    with pytest.raises(NotAllowed) as stale:
        guard.require_csrf(other, guard.csrf_token(mine))
    assert stale.value.status == 403


def test_without_a_token_every_action_is_refused() -> None:
    guard = Guard(None)
    assert guard.read_only and not guard.token_matches("")
    with pytest.raises(NotAllowed) as refused:
        guard.require_token_configured()
    assert refused.value.status == 401 and "read-only" in refused.value.reason
    assert Guard(SecretStr("")).read_only


def test_bearer_token_and_actor_header() -> None:
    guard = Guard(TOKEN)
    bearer = f"Bearer {TOKEN.get_secret_value()}"
    assert guard.bearer_actor(bearer, "cron").audit_name == "web:cron"
    assert guard.bearer_actor(bearer, None).audit_name == "web:api"
    for wrong in ("Bearer nope", f"Basic {TOKEN.get_secret_value()}", "Bearer "):
        with pytest.raises(NotAllowed) as refused:
            guard.bearer_actor(wrong, None)
        assert refused.value.status == 401
    for invalid in ("", "<script>", "a\nb", "x" * 65, "web: root"):
        with pytest.raises(NotAllowed) as bad:
            guard.bearer_actor(bearer, invalid)
        assert bad.value.status == 400 and "X-Tenantq-Actor" in bad.value.reason


def test_cross_origin_posts_are_refused() -> None:
    with pytest.raises(NotAllowed) as refused:
        Guard.require_same_origin("https://evil.example", "127.0.0.1:8765")
    assert refused.value.status == 403
    Guard.require_same_origin("http://127.0.0.1:8765", "127.0.0.1:8765")
    Guard.require_same_origin(None, "127.0.0.1:8765")


def test_cookies_are_http_only_strict_and_secure_over_https() -> None:
    plain = cookie_header("tenantq_session", "v", secure=False, max_age=60)
    assert plain == "tenantq_session=v; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
    assert cookie_header("c", "v", secure=True).endswith("; Secure")
    assert "Max-Age=0" in cookie_header("c", "v", secure=False, delete=True)
