"""The status page in a real browser (headless Chromium driven by Selenium): foreign text
never runs, and the actions a button posts are done, or refused, as the lease rows show.

Selenium and Debian's chromium-driver rather than raw DevTools: clicking a button and
following the form's redirect is what a user does, and WebDriver does exactly that
(the DevTools protocol would need a websocket client and hand-written clicks).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import socketserver
import threading
import wsgiref.simple_server
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cronlease import Scheduler
from cronlease.web import make_server
from tests.contract.test_web import XSS, make_scheduler
from tests.support.leases import paused
from tests.support.page_fleet import PAUSED, populate
from tests.support.procs import wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", ["sqlite"])]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if CHROMIUM is None or DRIVER is None:
        missing = "Debian's chromium and chromium-driver are not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: .ci/run installs them, so CI must not skip this test")
        pytest.skip(f"{missing} (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.add_argument("--window-size=1366,768")
    # both paths given: Selenium Manager looks nothing up and downloads nothing
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def page_server(scheduler: Scheduler, **options: Any) -> Iterator[str]:
    server = make_server(scheduler, port=0, refresh=None, cache=0, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


class _Threading(socketserver.ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    daemon_threads = True


@contextmanager
def foreign_form(action: str, fields: dict[str, str]) -> Iterator[str]:
    """Another origin's page with a form posting ``fields`` to ``action`` (another port of
    the same host: the same site, so a SameSite=Strict cookie goes with its POST)."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in fields.items()
    )
    body = (
        '<!doctype html><meta name="referrer" content="no-referrer">'
        f'<form method="post" action="{html.escape(action)}">{inputs}'
        '<button id="foreign" type="submit">go</button></form>'
    ).encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/html")])
        return [body]

    # threaded: Chromium may open a connection it sends nothing on, which would hold
    # a one-thread server (and the page's load) until it gives up
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, server_class=_Threading)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Iterator[Scheduler]:
    scheduler = make_scheduler(db_url, task_name)
    yield scheduler
    scheduler.runner.close()


@pytest.fixture
def fleet(db_url: str) -> Iterator[Scheduler]:
    """Seven tasks with a history, one paused (its button says resume), one failing."""
    scheduler = populate(db_url, size=3)
    yield scheduler
    scheduler.runner.close()


# What a user must reach without scrolling sideways: every button, and in each task's
# row (or card) its name, state, last run and next fire (the overview's 1st, 3rd, 4th
# and 7th cells) and its actions (the 10th).
_LAYOUT = """
const width = innerWidth, buttons = [...document.querySelectorAll("button")];
const cut = [...document.querySelectorAll("#tasks tr[id^='task-']")].flatMap(
  row => [1, 3, 4, 7, 10].map(index => {
    const box = row.children[index - 1].getBoundingClientRect();
    return box.width > 0 && box.left >= 0 && box.right <= width ? null : `${row.id}:${index}`;
  })).filter(Boolean);
return {width: width, scroll: document.documentElement.scrollWidth, buttons: buttons.length,
        right: Math.max(...buttons.map(b => b.getBoundingClientRect().right)), cut: cut};
"""


def test_foreign_text_stays_text_and_actions_are_done_or_refused(
    browser: Any, scheduler: Scheduler, task_name: str
) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    def text(element: str = "body", by: str = By.TAG_NAME) -> str:
        try:
            return str(browser.find_element(by, element).text)
        except WebDriverException:  # not loaded yet, or replaced as it was read (stale)
            return ""

    def click(button: str) -> None:
        browser.find_element(By.ID, button).click()

    def settled(check: Callable[[], bool], what: str) -> None:
        wait_for(check, 15, what)

    with page_server(scheduler) as read_only:
        browser.get(f"{read_only}/")
        assert browser.find_elements(By.TAG_NAME, "form") == []  # read-only by default
        for name in (task_name, f"{task_name}-bad", f"{task_name}-paused"):
            assert browser.find_element(By.ID, f"task-{name}")
        assert "failed (manual)" in text() and "succeeded (manual)" in text()
        # The failure's message is text: no script element, the title untouched.
        browser.get(f"{read_only}/task?name={task_name}-bad")
        assert f"bad input {XSS}" in text()
        assert browser.find_elements(By.TAG_NAME, "script") == []
        assert browser.title == f"{task_name}-bad · cronlease"

    verdict = {"allow": True}
    with page_server(scheduler, actions=True, authorize=lambda request: verdict["allow"]) as base:
        browser.get(f"{base}/")
        click(f"pause-{task_name}")
        settled(lambda: "/task?name=" in browser.current_url, "the redirect to the task page")
        assert paused(scheduler.store, task_name)
        # (the URL changes as the navigation starts: the new page may still be loading)
        settled(lambda: "paused" in text("facts", By.ID), "the task page")
        click(f"resume-{task_name}")  # from the task's page this time
        settled(lambda: not paused(scheduler.store, task_name), "resumed")
        click(f"run-{task_name}")
        settled(
            lambda: len(scheduler.store.recent_runs([task_name], 5).get(task_name, [])) == 2,
            "the run-now run recorded",
        )

        # refused: not authorized
        verdict["allow"] = False
        browser.get(f"{base}/")
        click(f"pause-{task_name}")
        settled(lambda: "not authorized" in text(), "the refusal")
        # refused: no CSRF token (the cookie gone, as from another site's form)
        verdict["allow"] = True
        browser.get(f"{base}/")
        browser.delete_all_cookies()
        click(f"pause-{task_name}")
        settled(lambda: "CSRF" in text(), "the refusal")
        # refused: another origin's form, even with the token (a no-referrer page at that)
        browser.get(f"{base}/")
        match = re.search(r'name="csrf" value="([^"]+)"', browser.page_source)
        assert match is not None
        fields = {"task": task_name, "do": "pause", "csrf": match.group(1)}
        with foreign_form(f"{base}/action", fields) as foreign:
            browser.get(foreign)
            click("foreign")
            settled(lambda: "cross-site" in text(), "the refusal")
        # refused: an action is not a GET
        browser.get(f"{base}/action")
        assert "Method Not Allowed" in text()
        assert not paused(scheduler.store, task_name)


def test_every_action_fits_and_run_now_says_so_and_shows_the_run(
    browser: Any, fleet: Scheduler
) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    def text(element: str) -> str:
        try:
            return str(browser.find_element(By.ID, element).text)
        except WebDriverException:  # not loaded yet, or replaced as it was read (stale)
            return ""

    def layout(width: int) -> dict[str, Any]:
        browser.set_window_size(width, 800)
        browser.get(f"{base}/")
        seen: dict[str, Any] = browser.execute_script(_LAYOUT)
        assert seen["width"] == width, seen  # (the window is the viewport: headless)
        assert seen["buttons"] == 2 * len(fleet.tasks), seen
        assert seen["scroll"] <= width and seen["right"] <= width and seen["cut"] == [], seen
        return seen

    slow, release = "long-export", threading.Event()
    fleet.add_task(lambda: release.wait(30), every="1h", name=slow)
    try:
        with page_server(fleet, actions=True, authorize=lambda request: True) as base:
            layout(1280)  # a laptop, with a resume button (the widest row)
            assert browser.find_element(By.ID, f"resume-{PAUSED}")
            browser.find_element(By.ID, f"run-{slow}").click()
            wait_for(lambda: text("notice"), 15, "the notice")
            assert text("notice") == f"{slow}: run started"
            # the page it lands on shows the run (its row was written as it started)
            assert "running (manual)" in text("runs") and "running" in text("facts")
            layout(400)  # a phone: one card per task
            browser.find_element(By.ID, f"resume-{PAUSED}").click()
            wait_for(lambda: text("notice"), 15, "the notice")
            assert text("notice") == f"{PAUSED}: resumed"
            assert not paused(fleet.store, PAUSED)
    finally:
        release.set()
    wait_for(lambda: not fleet.running_tasks, 10, "the slow run's end")


def test_a_schedule_added_and_edited_through_the_pages_forms(
    browser: Any, db_url: str, task_name: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def export(customer: str, fmt: str = "csv") -> None: ...

    scheduler = Scheduler(db_url)
    scheduler.register(export)
    scheduler.runner.ensure_schema()
    name = f"{task_name}-export"

    def fill(values: dict[str, str]) -> None:
        for key, value in values.items():
            box = browser.find_element(By.ID, f"f-{key}")
            box.clear()
            box.send_keys(value)

    try:
        with page_server(scheduler, actions=True, authorize=lambda request: "carol") as base:
            browser.get(f"{base}/")
            browser.find_element(By.ID, "schedules-link").click()
            wait_for(lambda: browser.find_elements(By.ID, "schedule-add-form"), 15, "the list")
            Select(browser.find_element(By.ID, "f-job")).select_by_value("export")
            fill({"name": name, "every": "1h", "kwargs": '{"customer": "acme"}'})
            browser.find_element(By.ID, "schedule-add").click()
            wait_for(lambda: browser.find_elements(By.ID, "schedule-set-form"), 15, "its page")
            assert browser.find_element(By.ID, "notice").text == f"{name}: schedule added"
            fill({"every": "", "cron": "0 3 * * *", "timezone": "Europe/Berlin"})
            browser.find_element(By.ID, "schedule-set").click()
            wait_for(lambda: scheduler.schedules.get(name).version == 2, 15, "the edit written")
            wait_for(lambda: browser.find_elements(By.ID, "notice"), 15, "the notice")
            stored = scheduler.schedules.get(name)
            assert (stored.every, stored.cron, stored.changed_by) == (None, "0 3 * * *", "carol")
            # a refusal keeps the page and says why, in the form
            fill({"kwargs": '{"colour": "red"}'})
            browser.find_element(By.ID, "schedule-set").click()
            wait_for(lambda: browser.find_elements(By.ID, "form-error"), 15, "the refusal")
            assert "colour" in browser.find_element(By.ID, "form-error").text
            assert scheduler.schedules.get(name).version == 2
            history = browser.find_element(By.ID, "changes").text
            assert "carol" in history and "0 3 * * *" in history
    finally:
        scheduler.runner.close()
