"""The Django admin's schedules (cronlease.contrib.django.schedules) in the throwaway
project, through Django's test client: added, changed, refused in the form (the
model's words, on the field), a stale version refused naming the newer one, deleted
with its history kept, and each page behind Django's permission of its kind.

SQLite only: every write is ``cronlease.Schedules``'s, whose statements
tests/contract/test_schedules.py proves on every backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import url_for
from tests.processes.test_django_app import (
    ADMIN_ONLY_URLS,
    ADMIN_SETTINGS,
    ADMIN_URLS,
    project_env,
    python,
)
from tests.support.django_project import write_project

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
    ], pages.stdout + pages.stderr
