"""The Django admin's schedules (cronlease.contrib.django.schedules) in the throwaway
project, through Django's test client: added, changed, refused in the form (the
model's words, on the field), a stale version refused naming the newer one, deleted
with its history kept, and each page behind Django's permission of its kind. A
``manage.py cronlease run`` replica runs a row added after it started, within one poll.

SQLite only: every write is ``cronlease.Schedules``'s, whose statements
tests/contract/test_schedules.py proves on every backend.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from cronlease import Schedules
from cronlease._run.housekeeping.schedule_poll import DEFAULT_POLL_SECONDS
from tests.conftest import url_for
from tests.processes.test_django_app import (
    ADMIN_ONLY_URLS,
    ADMIN_SETTINGS,
    ADMIN_URLS,
    project_env,
    python,
)
from tests.support import ledger
from tests.support.django_project import start_run, write_project
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow


def test_the_admin_adds_changes_refuses_and_deletes_schedules(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    write_project(tmp_path, url, ADMIN_SETTINGS)
    (tmp_path / "project_urls.py").write_text(ADMIN_URLS)  # the include, before the admin
    (tmp_path / "project_admin_urls.py").write_text(ADMIN_ONLY_URLS)
    env = project_env(tmp_path, url, task_name)
    name = f"{task_name}-export"
    pages = python(
        tmp_path,
        env,
        "-m",
        "tests.support.django_schedule_admin",
        task_name,
        name,
        "project_admin_urls",
    )
    assert pages.returncode == 0, pages.stderr
    change = f"/admin/cronlease/schedule/{name}/change/"
    assert pages.stdout.splitlines() == [
        "index True",  # listed on the admin index, with its add link
        f"add 302 {change}",
        "stored 1 1h admin",  # changed_by: the Django user
        "code task 200 True",  # the model's refusals, in the form
        "kwargs 200 True",
        "cron 200 True",
        "json 200 True",
        "job 200 True",  # only the jobs the code registers can be picked
        "listed True",  # none of them written
        "form True",
        "change 302 2",
        "stale 200 True",  # the form read at version 1: refused, naming version 2 and who
        "kept 2h",
        "history True",
        "list True",
        "plain 403 403",  # staff without the permissions
        "viewer 200 403",  # view_schedule: the list and the form, no add
        "viewer form 200 False",  # no save button
        "viewer post 403",
        "editor 302 editor",  # change_schedule
        "editor delete 403",  # not delete_schedule
        "stale delete 200 True",
        "delete 302 /admin/cronlease/schedule/",
        "gone True",
        "kept history 200 True",
        "admin only 200 200",
        "status invalid 200 True",  # the status view says why a row is not run
        "admin log 1:admin 2:admin 2:editor 3:admin",  # Django's: added, changed twice, deleted
        "logged change True",  # with the change's words
    ], pages.stdout + pages.stderr


STAMP = """
import os

from cronlease.contrib.django import scheduler
from tests.support import ledger as _ledger


def stamp(ctx, tag):
    # a job the project's code offers; a row passes the ledger tag it appends under
    _ledger.append(os.environ["CRONLEASE_DATABASE_URL"], tag, ctx.slot)


scheduler.register(stamp)
"""


#: the job declared in the settings instead, with a poll of their own
SETTINGS = """
CRONLEASE = {
    "SCHEDULE_POLL": "0.5s",
    "JOBS": {"stamp": {"call": "ledgerapp.jobs:stamp"}},
}
"""


@pytest.mark.parametrize("declared", ["code", "settings"])
def test_a_manage_py_cronlease_run_replica_runs_a_schedule_added_after_it_started(
    tmp_path: Path, task_name: str, declared: str
) -> None:
    """A schedule row added once ``manage.py cronlease run`` is up (``cronlease.Schedules``,
    the model the admin's forms write through) runs within one poll, once per tick. Its
    job registered by the project's code (the default 5 s poll), or declared in
    ``settings.CRONLEASE["JOBS"]`` with ``"SCHEDULE_POLL": "0.5s"``. SQLite only: the
    poll is the Scheduler's, not the app's, and tests/processes/test_schedules.py follows
    rows on every backend."""
    url = url_for("sqlite", tmp_path)
    manage = write_project(tmp_path, url, SETTINGS if declared == "settings" else "")
    poll = 0.5 if declared == "settings" else DEFAULT_POLL_SECONDS
    if declared == "code":
        with (tmp_path / "ledgerapp" / "tasks.py").open("a") as tasks:
            tasks.write(STAMP)
    else:  # a module of its own: the settings import it, and it imports no scheduler
        plain = STAMP.replace("scheduler.register(stamp)", "")
        plain = plain.replace("from cronlease.contrib.django import scheduler\n", "")
        (tmp_path / "ledgerapp" / "jobs.py").write_text(plain)
    ledger.setup(url)
    env = project_env(tmp_path, url, task_name)
    log = tmp_path / "run.log"
    proc = start_run(manage, env, log)
    model = Schedules(url)
    tag = f"{task_name}-row"
    try:
        wait_for(lambda: "stamp" in model.jobs(), 20, "the replica offers its job")
        added_at = time.time()
        model.add(f"s{task_name}", job="stamp", every="1s", kwargs={"tag": tag})
        wait_for(lambda: len(ledger.entries(url, tag)) >= 2, 12, "two runs of the row")
    finally:
        model.close()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, log.read_text(errors="replace")
    found = [slot for slot, _ in ledger.entries(url, tag)]
    assert_every_slot_once(found)
    # within one poll, at the schedule's first fire time after it was seen (1 s for the
    # poll's read and the tick's start on a loaded host)
    assert found[0] <= (added_at + poll + 1.0 + 1.0) * 1000, (found, added_at)
