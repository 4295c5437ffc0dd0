"""Guarantee: the console served over TLS (uvicorn with the secure stack's certificate, a
client that verifies it against the stack's CA) sends the security headers on every answer,
an error included: a Content-Security-Policy that allows no inline script (``script-src
'self'``, no ``'unsafe-inline'``) and no framing (``frame-ancestors 'none'``, with
``X-Frame-Options: DENY``), a ``Referrer-Policy`` and ``nosniff``; its pages carry no inline
script, event handler or ``javascript:`` link for that policy to block; and its cookies, the
sign-in nonce and the session, are ``HttpOnly``, ``SameSite=Strict`` and ``Secure``. The same
console over plain http sets them without ``Secure`` (a browser would drop a Secure cookie
there)."""

from __future__ import annotations

import contextlib
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from email.message import Message

import pytest
from secure_stack import secure_stack
from topology_stack import TopologyStack
from web_console import console_settings, csrf_of, served

import tenantq
from tenantq.devstack.tls import TlsFiles
from tenantq.topic_admin import ensure_topics
from tenantq.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.secure]

TOKEN = "tls-console-token-for-tests"
PAGES = ("/", "/fragments/overview", "/tenants", "/jobs", "/dlq", "/login", "/nowhere")
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)


@pytest.fixture(scope="module")
def secure() -> Iterator[TopologyStack]:
    with secure_stack() as stack:
        yield stack


@contextlib.contextmanager
def console_served(settings: tenantq.Settings, tls: TlsFiles | None) -> Iterator[str]:
    """The console on a free port of 127.0.0.1, over TLS when ``tls`` is given."""
    app = create_app(console_settings(settings, TOKEN))
    try:
        with served(app, "test-console-tls", tls) as base:
            yield base
    finally:
        app.state.console.close()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def fetch(
    url: str,
    context: ssl.SSLContext | None,
    *,
    cookies: str = "",
    form: dict[str, str] | None = None,
) -> tuple[int, Message, str]:
    """(status, headers, body) of a GET, or of a POST of ``form``; redirects not followed."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers={"Cookie": cookies} if cookies else {})
    opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def assert_secured(headers: Message, where: str) -> None:
    policy = headers["content-security-policy"] or ""
    directives = {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}
    assert directives.get("script-src") == ["'self'"], (where, policy)
    assert directives.get("frame-ancestors") == ["'none'"], (where, policy)
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy, (where, policy)
    assert headers["x-frame-options"] == "DENY", where
    assert headers["referrer-policy"] in ("same-origin", "no-referrer", "strict-origin"), where
    assert headers["x-content-type-options"] == "nosniff", where


def assert_strict_cookie(header: str, *, secure: bool) -> None:
    attributes = [part.strip().lower() for part in header.split(";")[1:]]
    assert "httponly" in attributes and "samesite=strict" in attributes, header
    assert ("secure" in attributes) is secure, header


def sign_in(base: str, context: ssl.SSLContext | None, *, secure: bool) -> str:
    """Sign in through the login form; checks both cookies; returns the session cookie."""
    status, headers, page = fetch(f"{base}/login", context)
    assert status == 200
    nonce = headers["set-cookie"]
    assert nonce.startswith("tenantq_csrf=")
    assert_strict_cookie(nonce, secure=secure)
    form = {"user": "oncall", "token": TOKEN, "csrf": csrf_of(page)}
    status, headers, _ = fetch(f"{base}/login", context, cookies=nonce.split(";")[0], form=form)
    assert status == 303, status
    session = next(
        value
        for value in headers.get_all("set-cookie") or []
        if value.startswith("tenantq_session=")
    )
    assert_strict_cookie(session, secure=secure)
    assert_secured(headers, "POST /login")
    return session.split(";")[0]


def test_the_console_over_tls_is_locked_down(secure: TopologyStack) -> None:
    tls = TlsFiles.under(secure.home)
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    with secure.settings("tls") as settings:
        ensure_topics(settings)
        with console_served(settings, tls) as base:
            check_over_tls(base, context)


def check_over_tls(base: str, context: ssl.SSLContext) -> None:
    """Every page, signed in and not, and an API error, over ``base`` (https)."""
    assert base.startswith("https://")
    session = sign_in(base, context, secure=True)
    for path in PAGES:
        for cookies in ("", session):
            status, headers, body = fetch(base + path, context, cookies=cookies)
            assert status == (404 if path == "/nowhere" else 200), (path, status)
            assert_secured(headers, path)
            assert not INLINE_SCRIPT.search(body), (path, INLINE_SCRIPT.search(body))
            assert not EVENT_HANDLER.search(body), (path, EVENT_HANDLER.search(body))
            assert "javascript:" not in body.lower(), path
    status, headers, _ = fetch(f"{base}/api/jobs/not-a-job", context)
    assert status in (400, 404) and headers["content-type"].startswith("application/json")
    assert_secured(headers, "an API error")
    # Nobody gets in without the CA: the certificate is the stack's own.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        fetch(f"{base}/login", ssl.create_default_context())


def test_the_console_over_plain_http_sets_its_cookies_without_secure(
    secure: TopologyStack,
) -> None:
    with secure.settings("plain") as settings, console_served(settings, None) as base:
        assert base.startswith("http://")
        session = sign_in(base, None, secure=False)
        status, headers, _ = fetch(f"{base}/", None, cookies=session)
        assert status == 200
        assert_secured(headers, "/")
