"""The example Django project's admin in a real browser (headless Chromium, as
tests/contract/test_web_browser.py drives it): served by ``manage.py runserver`` as a
new user starts it, the admin is styled (its stylesheet loaded and applied), its
index links cronlease's tasks, whose page is styled too, and a schedule kept in the
database is added and changed through the admin's forms."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.contract.test_web_browser import browser  # noqa: F401  (the fixture)
from tests.processes.test_django_app import free_port, http_status
from tests.support.procs import ROOT, wait_for

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "django_project"


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_example_admin_is_styled_and_links_cronlease(
    browser: Any,  # noqa: F811  (the imported fixture)
    tmp_path: Path,
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONLEASE_", "DJANGO_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]),
        DJANGO_DATABASE_PATH=str(tmp_path / "db.sqlite3"),
        DJANGO_SUPERUSER_PASSWORD="pw",
        PYTHONUNBUFFERED="1",
    )
    manage = [sys.executable, str(EXAMPLE / "manage.py")]

    def setup(*words: str) -> None:
        done = subprocess.run(
            [*manage, *words], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr

    setup("migrate", "--verbosity", "0")
    setup("createsuperuser", "--noinput", "--username", "admin", "--email", "a@example.com")
    port = free_port()
    log = tmp_path / "runserver.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # runserver stops on Ctrl-C by Python's default handler, which Python does not
            # install where SIGINT is ignored at exec; this process may have it ignored
            # (seen: a runserver of a CI run that never stopped had SIGINT and SIGQUIT
            # ignored, as a shell's background job or a concurrent system() leaves them)
            preexec_fn=_interruptible,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_status(f"{base}/healthz"), timeout=60, message="runserver answers")
        browser.get(f"{base}/admin/login/")
        browser.find_element(By.NAME, "username").send_keys("admin")
        browser.find_element(By.NAME, "password").send_keys("pw")
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        # the admin's index, not the login page still shown (it has a #content-main too)
        tasks = 'a[href="/admin/cronlease/taskstatus/"]'
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, tasks), timeout=30)

        def styled() -> bool:
            # base.css loaded and applied: the header has the admin's colour, not none; a
            # page replaced between finding the header and reading it is read again
            try:
                header = browser.find_element(By.ID, "header")
                sheets = browser.execute_script(
                    "return [...document.styleSheets]"
                    ".filter(s => s.cssRules.length).map(s => s.href)"
                )
                loaded = any(str(href).endswith("/static/admin/css/base.css") for href in sheets)
                return loaded and header.value_of_css_property("background-color") not in (
                    "rgba(0, 0, 0, 0)",
                    "transparent",
                )
            except StaleElementReferenceException:
                return False

        wait_for(styled, timeout=30, message=lambda: f"a styled page: {browser.page_source}")
        link = browser.find_element(By.CSS_SELECTOR, tasks)
        assert link.text == "Tasks"
        link.click()
        wait_for(lambda: browser.find_elements(By.ID, "cronlease"), timeout=30)
        names = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#cronlease td a")]
        assert "clear_expired_sessions" in names and "nightly-report" in names, names
        wait_for(styled, timeout=30, message=lambda: f"a styled page: {browser.page_source}")

        # a schedule added, then changed, through the forms (the job from the list)
        browser.get(f"{base}/admin/cronlease/schedule/add/")
        Select(browser.find_element(By.ID, "id_job")).select_by_value("export_report")
        browser.find_element(By.ID, "id_name").send_keys("export-acme")
        browser.find_element(By.ID, "id_every").send_keys("1h")
        browser.find_element(By.ID, "id_kwargs").send_keys('{"customer": "acme"}')
        browser.find_element(By.NAME, "_save").click()
        wait_for(lambda: browser.current_url.endswith("/export-acme/change/"), timeout=30)
        every = browser.find_element(By.ID, "id_every")
        every.clear()
        every.send_keys("2h")
        browser.find_element(By.NAME, "_save").click()

        def history() -> str:
            # the save's redirect may replace the page between finding the element and
            # reading it: that read is of the old page, and the next poll reads the new one
            try:
                found = browser.find_elements(By.ID, "schedule-history")
                return str(found[0].text) if found else ""
            except StaleElementReferenceException:
                return ""

        wait_for(lambda: '"1h" → "2h"' in history(), timeout=30, message="the change listed")
        assert "admin" in history() and "add" in history(), history()
        wait_for(styled, timeout=30, message=lambda: f"a styled page: {browser.page_source}")
    finally:
        server.send_signal(signal.SIGINT)
        # its scheduler's shutdown waits up to its grace (25 s) for runs in flight
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            pytest.fail(f"runserver still up 60 s after Ctrl-C:\n{log.read_text()[-4000:]}")
