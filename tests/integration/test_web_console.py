"""Guarantee: from the console alone, in a real browser, on-call staff see a queue with live
numbers; a job that died shows why, with a hostile payload rendered as text (no script runs);
an action without the token is refused (401); after signing in, the dead job is found on the
Dead letters page, previewed (dry run: nothing changes), replayed with a canary through the
engine of ``tenantq dlq replay`` once the fix is out, and its page then shows ``succeeded``;
every replay leaves an audit row naming the console user; signing out ends the session, so a
saved copy of its cookie acts no more (401). Screenshots of each page go to
``reports/web-screenshots/``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import psycopg
from dead_letter_jobs import FlakyApp, audit_rows, fill_dlq
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait
from support import running_worker, states, wait_for
from web_console import browser, console_settings, screenshot, serving

import tenantq

TOKEN = "console-token-for-tests"
SESSION = "tenantq_session"
#: A tenant of this test's own: the session's database is shared with every other test.
TENANT = f"oncall-{uuid.uuid4().hex[:8]}"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def _text(driver: WebDriver, css: str) -> str:
    # A page that refreshes itself swaps its fragments: an element found a moment ago can be
    # gone when its text is read. Find it again.
    for _ in range(20):
        try:
            return str(driver.find_element(By.CSS_SELECTOR, css).text)
        except StaleElementReferenceException:
            time.sleep(0.05)
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _submit(driver: WebDriver, by: str, value: str) -> None:
    """Click what submits a form (or follows a link) and wait until the next page has replaced
    this one: an element read before that is the old page's, or goes stale while read."""
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(by, value).click()
    WebDriverWait(driver, 20).until(lambda _: _replaced(page))


def _replaced(page: WebElement) -> bool:
    """Whether ``page`` (the old page's root) is gone: selenium's ``staleness_of``, plus the
    way Chromium sometimes says it while the next page is being attached."""
    try:
        page.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in (error.msg or ""):
            return True
        raise
    return False


def _texts(driver: WebDriver, css: str) -> list[str]:
    """The texts of every element ``css`` finds, found again if the page swapped them."""
    for _ in range(20):
        try:
            return [str(element.text) for element in driver.find_elements(By.CSS_SELECTOR, css)]
        except StaleElementReferenceException:
            time.sleep(0.05)
    return [str(element.text) for element in driver.find_elements(By.CSS_SELECTOR, css)]


def _post(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _post_form(url: str, form: dict[str, str], cookies: dict[str, str]) -> int:
    """POST a form as a script holding a saved copy of a browser's cookies would."""
    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form).encode(),
        headers={"Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_find_why_a_job_died_replay_it_and_see_it_succeed(
    settings: tenantq.Settings, db: psycopg.Connection[Any], flaky: FlakyApp
) -> None:
    jobs = [
        {"job_type": "charge", "tenant": TENANT, "payload": {"fail": True, "note": HOSTILE}},
        {"job_type": "export", "tenant": "globex", "payload": {"fail": False, "i": 1}},
        {"job_type": "export", "tenant": "initech", "payload": {"fail": False, "i": 2}},
    ]
    dead_id, *_ = fill_dlq(flaky, settings, db, jobs)
    console = console_settings(settings, TOKEN)
    started = time.monotonic()
    with serving(console) as base, browser() as driver:
        assert isinstance(driver, WebDriver)
        # Overview: the queue with live numbers, refreshed in place.
        driver.get(base + "/")
        row = driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"]')
        assert row.find_element(By.CSS_SELECTOR, '[data-k="lag"]').text.isdigit()
        assert "PostgreSQL up" in _text(driver, "#health-db")
        assert "Kafka up" in _text(driver, "#health-broker")
        wait_for(
            lambda: (
                int(driver.find_element(By.ID, "live").get_attribute("data-refreshes") or 0) >= 2
            ),
            timeout=20,
            what="two refreshes of the overview",
        )
        # The session's database holds every test's queue "default"; the console counts its
        # own deployment's (this test's topic prefix): count those directly.
        dead = db.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE queue = 'default' AND state = 'dead' "
            "AND finished_at > now() - interval '1 hour' AND deployment = %s",
            (settings.topic_prefix,),
        ).fetchone()
        assert dead is not None and dead[0] >= 1
        dead_cell = driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"] a.bad')
        assert dead_cell.text.replace("\u2009", "") == str(dead[0])
        screenshot(driver, "overview")

        # The job's page says why it died; the hostile payload is text, and no script ran.
        driver.get(f"{base}/jobs/{dead_id}")
        assert _text(driver, "#job-state") == "dead"
        assert "downstream rejected the request" in _text(driver, "#last-error")
        assert "<script>window.__pwned = 1</script>" in _text(driver, "#payload")
        assert driver.execute_script("return window.__pwned === undefined") is True
        screenshot(driver, "job-dead")

        # Acting without the token is refused: the form post and a script's POST.
        _submit(driver, By.ID, "run-again")
        assert "sign in" in _text(driver, "#error").lower()
        assert _post(base + "/api/dlq/replay", {"job_ids": [str(dead_id)]}) == 401
        screenshot(driver, "refused")
        assert states(db, [dead_id]) == {dead_id: "dead"}

        # Sign in, find the letter on the Dead letters page, preview its replay.
        driver.get(base + "/login?next=/dlq")
        driver.find_element(By.ID, "login-user").send_keys("oncall")
        driver.find_element(By.ID, "login-token").send_keys(TOKEN)
        _submit(driver, By.ID, "login-submit")
        assert _text(driver, "#user") == "oncall"
        driver.find_element(By.NAME, "tenant").send_keys(TENANT)
        _submit(driver, By.ID, "dlq-search")
        letters = _texts(driver, "#letters tbody tr")
        assert len(letters) == 1 and "PermanentError" in letters[0]
        screenshot(driver, "dead-letters")
        driver.find_element(By.CSS_SELECTOR, f'input[name="job_id"][value="{dead_id}"]').click()
        _submit(driver, By.ID, "preview-replay")
        assert "1 would be replayed" in _text(driver, "#replay-summary")
        assert states(db, [dead_id]) == {dead_id: "dead"}
        screenshot(driver, "replay-preview")

        # The fix is out: replay it with a canary of one, and watch it succeed.
        flaky.fixed.set()
        with running_worker(flaky.app, settings, concurrency=4):
            driver.find_element(By.ID, "canary-count").clear()
            driver.find_element(By.ID, "canary-count").send_keys("1")
            _submit(driver, By.ID, "replay-now")
            assert "1 replayed" in _text(driver, "#replay-summary")
            assert "canary of 1 succeeded" in _text(driver, "#canary")
            screenshot(driver, "replay-done")
            _submit(driver, By.CSS_SELECTOR, "a.replayed-job")

            def shows_succeeded() -> bool:
                driver.refresh()
                return _text(driver, "#job-state") == "succeeded"

            wait_for(shows_succeeded, timeout=30, interval=0.5, what="job page says succeeded")
            assert "succeeded" in _text(driver, "#attempts")
            screenshot(driver, "job-succeeded")
        elapsed = time.monotonic() - started

        # The other pages, for the report.
        driver.get(base + "/tenants")
        assert driver.find_elements(By.CSS_SELECTOR, "#tenants tbody tr")
        screenshot(driver, "tenants")
        driver.get(f"{base}/jobs?tenant={TENANT}")
        assert str(dead_id) in _text(driver, "#jobs")
        screenshot(driver, "jobs")

        # Signing out ends the session: a saved copy of its cookie no longer acts.
        saved = {name: driver.get_cookie(name)["value"] for name in (SESSION, "tenantq_csrf")}
        sign_out = 'form[action="/logout"]'
        form_token = driver.find_element(By.CSS_SELECTOR, f'{sign_out} input[name="csrf"]')
        csrf = str(form_token.get_attribute("value"))
        assert _post_form(f"{base}/jobs/{dead_id}/run", {"csrf": csrf}, saved) == 409
        _submit(driver, By.CSS_SELECTOR, f"{sign_out} button")
        assert driver.find_elements(By.ID, "sign-in") and driver.get_cookie(SESSION) is None
        assert _post_form(f"{base}/jobs/{dead_id}/run", {"csrf": csrf}, saved) == 401
    assert elapsed < 60, f"find, preview, replay and see it succeed took {elapsed:.0f}s"
    assert flaky.calls[dead_id] == 2
    audits = audit_rows(db, ["web:oncall"])
    assert [row[:5] for row in audits] == [
        ("web:oncall", "replay", True, 1, 1),
        ("web:oncall", "replay", False, 1, 1),
    ]
