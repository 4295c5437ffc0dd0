"""Helpers of the console scenarios: the console served by uvicorn in a thread, a headless
Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by Selenium, and screenshots in
``reports/web-screenshots/``."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from support import free_port, wait_for

import tenantq
from tenantq.devstack.tls import TlsFiles
from tenantq.settings import WebSettings
from tenantq.web.app import SERVER_OPTIONS, create_app

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "reports" / "web-screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: Flags that work on this kind of machine (no sandbox as root, no calls home).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,1000",
)


@contextlib.contextmanager
def consoles(token: str) -> Iterator[Callable[..., FastAPI]]:
    """Makes console processes of their own on a settings' database and prefix (web settings
    as keywords, ``token`` unless one is given); their connections are closed on exit."""
    made: list[FastAPI] = []

    def make(settings: tenantq.Settings, **web: Any) -> FastAPI:
        configured = settings.model_copy(update={"web": WebSettings(**{"token": token, **web})})
        made.append(create_app(configured))
        return made[-1]

    try:
        yield make
    finally:
        for app in made:
            app.state.console.close()


def console_settings(settings: tenantq.Settings, token: str | None) -> tenantq.Settings:
    """``settings`` with a console section: this token, a one-second refresh."""
    return settings.model_copy(
        update={"web": WebSettings(token=token, refresh_seconds=1.0, kafka_timeout_seconds=3)}
    )


@contextlib.contextmanager
def serving(settings: tenantq.Settings) -> Iterator[str]:
    """The console on a free port of 127.0.0.1 for the block; yields its base URL."""
    with served(create_app(settings), "test-console") as base:
        yield base


@contextlib.contextmanager
def served(app: FastAPI, thread_name: str, tls: TlsFiles | None = None) -> Iterator[str]:
    """``app`` served by uvicorn (the console's server options) in a thread named
    ``thread_name``, on a free port of 127.0.0.1, over TLS with the server certificate and
    key of ``tls`` when given; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        ssl_certfile=None if tls is None else tls.server_cert,
        ssl_keyfile=None if tls is None else tls.server_key,
        **SERVER_OPTIONS,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=thread_name, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30, what="console started")
        yield f"{'http' if tls is None else 'https'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def require_chromium() -> None:
    """Skip where Chromium is missing, except in CI, where ``.ci/run`` installs it."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    message = (
        "needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def browser() -> Iterator[object]:
    """A headless Chromium with a fresh profile, closed afterwards."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tenantq-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: object, name: str) -> Path:
    """Save the whole page as ``reports/web-screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    return path


def csrf_of(page: str) -> str:
    """The CSRF token the forms of a console page carry."""
    return page.split('name="csrf" value="')[1].split('"')[0]


def sign_in(client: Any, user: str, token: str) -> str:
    """Sign ``client`` (a ``TestClient``) in as ``user``; the CSRF token of its session."""
    form = {"user": user, "token": token, "csrf": csrf_of(client.get("/login").text)}
    answer = client.post("/login", data=form, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return csrf_of(client.get("/login").text)
