"""A throwaway Django project in a directory, for the cronlease.contrib.django tests.

Its settings are ``INSTALLED_APPS`` and ``DATABASES`` only (plus what a test adds):
the app and one app of the test's own, ``ledgerapp``, whose ``tasks.py`` declares
with the decorator an ``every="1s"`` task that appends its slot to the ledger
(:mod:`tests.support.recipes`: ``CRONLEASE_DATABASE_URL`` is the ledger's
database and ``CRONLEASE_TEST_TASK`` the task's name).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy.engine import make_url

MANAGE = """\
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project_settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""

TASKS = """\
from cronlease.contrib.django import scheduler
from tests.support.recipes import attach

attach(scheduler)
"""


def databases_entry(url: str) -> dict[str, object]:
    """The DATABASES entry of the same database as the SQLAlchemy ``url``."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parsed.database}
    engine = "postgresql" if backend == "postgresql" else "mysql"
    return {
        "ENGINE": f"django.db.backends.{engine}",
        "NAME": parsed.database or "",
        "USER": parsed.username or "",
        "PASSWORD": parsed.password or "",
        "HOST": parsed.host or "",
        "PORT": str(parsed.port or ""),
        "OPTIONS": dict(parsed.query),  # the driver's: e.g. application_name
    }


def write_project(root: Path, url: str, extra: str = "") -> Path:
    """Write the project into ``root`` (settings module ``project_settings``); its manage.py."""
    (root / "ledgerapp").mkdir(parents=True, exist_ok=True)
    (root / "ledgerapp" / "__init__.py").write_text("")
    (root / "ledgerapp" / "tasks.py").write_text(TASKS)
    settings = f"""\
        INSTALLED_APPS = ["cronlease.contrib.django", "ledgerapp"]
        DATABASES = {{"default": {databases_entry(url)!r}}}
        """
    (root / "project_settings.py").write_text(textwrap.dedent(settings) + extra)
    manage = root / "manage.py"
    manage.write_text(MANAGE)
    return manage


def start_run(manage: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``manage.py cronlease run --grace 5`` in the project's folder, its output in ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(manage), "cronlease", "run", "--grace", "5"],
            cwd=manage.parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
