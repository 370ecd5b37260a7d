"""cronlease.contrib.django in a throwaway project: INSTALLED_APPS and DATABASES only.

Two ``manage.py cronlease run`` processes run every tick once, at the ledger; a
plain ``django.setup()`` script (and ``manage.py check``) writes nothing to the
database; a settings mistake exits 2 naming the setting, the task and the key.
``manage.py cronlease`` lists, runs and hints at the commands that act on the
settings (``schedule`` checks rows against the project's jobs and tasks); the
admin index links the pages for whom Django's permission allows.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from cronlease import LeaseStore
from tests.conftest import url_for
from tests.support import databases, ledger
from tests.support.attempts import past_slot, record_attempts
from tests.support.django_project import start_run, write_project
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import ROOT, wait_for

pytestmark = pytest.mark.slow

TICKS = 3


def project_env(root: Path, url: str, task: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONLEASE_", "DJANGO_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(root)]),
        CRONLEASE_DATABASE_URL=url,  # the ledger's (the tasks' side effect), not cronlease's
        CRONLEASE_TEST_TASK=task,
        PYTHONUNBUFFERED="1",
    )
    return env


def django_url(backend: str, tmp_path: Path) -> str:
    url = url_for(backend, tmp_path)  # skips when the server is not there
    # a database of its own (the run's schema is a search_path Django cannot give)
    return databases.postgres_database() if backend == "postgresql" else url


def python(
    cwd: Path, env: dict[str, str], *argv: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` in the project: a real ``manage.py`` or a support script."""
    return pythons(cwd, env, list(argv), timeout=timeout)[0]


def pythons(
    cwd: Path, env: dict[str, str], *argvs: list[str], timeout: float = 120
) -> list[subprocess.CompletedProcess[str]]:
    """:func:`python` for each of ``argvs``, all started at once: commands that neither
    write nor depend on each other, whose interpreter and Django starts then overlap."""
    procs = [
        subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        deadline = time.monotonic() + timeout
        done = []
        for proc in procs:
            out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        return done
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_manage_py_cronlease_runs_run_every_tick_once(
    backend: str, tmp_path: Path, task_name: str
) -> None:
    url = django_url(backend, tmp_path)
    manage = write_project(tmp_path, url)
    ledger.setup(url)
    env = project_env(tmp_path, url, task_name)
    logs = [tmp_path / f"run-{n}.log" for n in range(2)]
    procs = [start_run(manage, env, log) for log in logs]

    def output() -> str:
        return "\n".join(log.read_text(errors="replace") for log in logs)

    try:
        # both replicas handle ticks (each marks itself alive), then a few more ticks
        wait_for(
            lambda: (
                {pid for pid, _ in ledger.entries(url, f"{task_name}:alive")}
                == {p.pid for p in procs}
            ),
            timeout=30,
            message="both manage.py cronlease run processes handle ticks",
        )
        first = len(ledger.entries(url, task_name))
        wait_for(lambda: len(ledger.entries(url, task_name)) >= first + TICKS, timeout=30)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=30) for proc in procs]
    assert codes == [0, 0], output()
    assert_every_slot_once([slot for slot, _ in ledger.entries(url, task_name)])


#: what ``manage.py cronlease`` offers: the CLI's commands that act on the settings
#: (``web`` and ``import-crontab`` do not: the admin pages, a cronlease.toml)
DJANGO_COMMANDS = [
    "run",
    "check",
    "status",
    "history",
    "pause",
    "resume",
    "trigger",
    "forget",
    "schedule",
    "init-db",
]


def listed_commands(help_text: str) -> list[str]:
    """The commands a ``--help`` lists, in order (the lines under ``COMMAND``)."""
    section = help_text.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return [
        line.split()[0]
        for line in section.splitlines()
        if line.startswith("    ") and not line.startswith("     ")
    ]


def test_manage_py_cronlease_lists_the_commands_it_runs_and_hints_at_them(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    manage = write_project(tmp_path, url)
    env = project_env(tmp_path, url, task_name)

    # none of them writes: they run at once
    shown, django_help, status, web = pythons(
        tmp_path,
        env,
        *(
            [str(manage), *words]
            for words in (
                ["cronlease", "--help"],
                ["help", "cronlease"],  # Django's own way to ask
                ["cronlease", "status"],  # a fresh file: the hint names what works here
                ["cronlease", "web"],
            )
        ),
    )
    assert shown.returncode == 0, shown.stderr
    assert listed_commands(shown.stdout) == DJANGO_COMMANDS, shown.stdout
    assert "import-crontab" not in shown.stdout and "settings.CRONLEASE" in shown.stdout
    assert "--database" not in shown.stdout
    assert listed_commands(django_help.stdout) == DJANGO_COMMANDS, django_help.stdout
    assert status.returncode == 0, status.stderr
    assert task_name in status.stdout
    assert "a replica or manage.py cronlease init-db creates them" in status.stdout
    assert web.returncode == 2
    offered = ", ".join(DJANGO_COMMANDS)
    assert f"manage.py cronlease runs {offered}; for web, use cronlease" in web.stderr
    assert not Path(url.removeprefix("sqlite:///")).exists()  # nothing above wrote


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_manage_py_cronlease_steers_the_settings_tasks_on_the_settings_database(
    backend: str, tmp_path: Path, task_name: str
) -> None:
    url = django_url(backend, tmp_path)
    manage = write_project(tmp_path, url)
    ledger.setup(url)  # the task's side effect, for trigger to succeed
    env = project_env(tmp_path, url, task_name)
    # one real manage.py that writes; the rest through call_command
    init = python(tmp_path, env, str(manage), "cronlease", "init-db")
    assert init.returncode == 0, init.stderr
    assert "cronlease tables are ready" in init.stdout
    steps = [
        ["pause", task_name],
        ["trigger", task_name],
        ["resume", task_name],
        ["trigger", task_name],  # the tasks.py task, run in this process
        ["history", task_name, "--json"],
        ["check", "--json"],
        ["forget", task_name],
        ["forget", "--force", task_name],
        ["status", "--database", url],
        ["import-crontab", "-"],
    ]
    ran = python(tmp_path, env, "-m", "tests.support.django_commands", *map(json.dumps, steps))
    assert ran.returncode == 0, ran.stderr
    (
        paused,
        refused,
        resumed,
        triggered,
        history,
        check,
        declared,
        forgot,
        settings_only,
        crontab,
    ) = json.loads(ran.stdout.splitlines()[-1])
    assert paused["code"] == 0, paused
    assert paused["out"] == f"paused {task_name!r} on every replica (a run in progress finishes)\n"
    assert refused["code"] == 1
    assert "the task is paused (manage.py cronlease resume ...)" in refused["err"]
    assert resumed["code"] == 0, resumed
    assert triggered["code"] == 0, triggered
    assert triggered["out"].startswith(f"{task_name}: succeeded"), triggered
    assert len(ledger.entries(url, task_name)) == 1
    assert history["code"] == 0, history
    assert [run["outcome"] for run in json.loads(history["out"])] == ["succeeded"]
    assert check["code"] == 0, check
    described = json.loads(check["out"])
    assert described["config"] == "settings.CRONLEASE"
    assert [task["name"] for task in described["tasks"]] == [task_name]
    assert declared["code"] == 2 and "give --force" in declared["err"]  # tasks.py declares it
    assert forgot["code"] == 0 and forgot["out"].startswith(f"forgot {task_name!r}"), forgot
    assert settings_only["code"] == 2  # the settings decide the database
    assert "unrecognized arguments: --database" in settings_only["err"]
    assert crontab["code"] == 2 and "for import-crontab, use cronlease" in crontab["err"]


JOB = """
from cronlease.contrib.django import scheduler


def export(ctx, customer, limit=10):
    # a job the project's code offers to schedules kept in the database
    pass


scheduler.register(export)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_manage_py_cronlease_schedule_checks_rows_against_the_projects_code(
    backend: str, tmp_path: Path, task_name: str
) -> None:
    """``manage.py cronlease schedule`` is the CLI's, on the settings' database: a row is
    checked against the jobs the project's code registers and refused a name its tasks
    use, with no replica running."""
    url = django_url(backend, tmp_path)
    write_project(tmp_path, url)
    with (tmp_path / "ledgerapp" / "tasks.py").open("a") as tasks:
        tasks.write(JOB)
    env = project_env(tmp_path, url, task_name)
    customer = '{"customer": "c"}'
    fitting = ["--job", "export", "--every", "60", "--kwargs", customer]
    name = f"s{task_name}"  # the databases are shared: a name of this test's own
    steps = [
        ["schedule", "add", name, "--job", "exprot", "--every", "1m"],
        ["schedule", "add", name, "--job", "export", "--every", "1m"],
        ["schedule", "add", task_name, "--job", "export", "--every", "1m", "--kwargs", customer],
        ["schedule", "add", name, "--json", *fitting],
        ["schedule", "set", name, "--every", "2m", "--version", "2"],
        ["schedule", "show", name, "--json"],
        ["schedule", "rm", name, "--version", "1"],
        ["schedule", "history", name, "--json"],
        ["schedule", "ls", "--database", url],
    ]  # fmt: skip
    ran = python(tmp_path, env, "-m", "tests.support.django_commands", *map(json.dumps, steps))
    assert ran.returncode == 0, ran.stderr
    unknown, unfit, taken, added, stale, shown, removed, history, settings_only = json.loads(
        ran.stdout.splitlines()[-1]
    )
    assert unknown["code"] == 2 and "unknown job 'exprot'; known: export" in unknown["err"]
    assert unfit["code"] == 2 and "missing a required argument: 'customer'" in unfit["err"]
    assert taken["code"] == 2 and "a task declared in code here has that name" in taken["err"]
    assert added["code"] == 0, added
    assert json.loads(added["out"])["kwargs"] == {"customer": "c"}
    assert stale["code"] == 2 and "is at version 1 (changed by " in stale["err"], stale
    assert json.loads(shown["out"])["every"] == "60s"
    assert removed["code"] == 0 and removed["out"].startswith(f"removed schedule {name!r}")
    assert "manage.py cronlease schedule history" in removed["out"]  # hints as typed here
    assert [c["action"] for c in json.loads(history["out"])] == ["add", "remove"]
    assert settings_only["code"] == 2  # the settings decide the database
    assert "unrecognized arguments: --database" in settings_only["err"]


def test_a_plain_django_setup_and_manage_py_check_write_nothing(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    # AUTOSTART opted in: still only a process that serves a request starts a replica
    manage = write_project(tmp_path, url, 'CRONLEASE = {"AUTOSTART": True}\n')
    ledger.setup(url)  # the file exists: nothing but cronlease's tables could appear in it
    env = project_env(tmp_path, url, task_name)
    script = (
        "import os, django\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'project_settings'\n"
        "django.setup()\n"
        "from cronlease.contrib.django import scheduler\n"
        "print(sorted(scheduler.tasks))\n"
        # a live-server test (LiveServerTestCase, pytest-django's live_server) serves
        # through a plain WSGIHandler: under the test environment it starts nothing
        "from django.core.handlers.wsgi import WSGIHandler\n"
        "from django.core.signals import request_started\n"
        "from django.test.utils import setup_test_environment\n"
        "setup_test_environment()\n"
        "request_started.send(sender=WSGIHandler)\n"
        "print(scheduler.running)\n"
    )
    setup, check = pythons(tmp_path, env, ["-c", script], [str(manage), "check"])
    assert setup.returncode == 0, setup.stderr
    declared, running = setup.stdout.split()
    assert declared == repr([task_name])  # declared from ledgerapp/tasks.py
    assert running == "False"
    assert check.returncode == 0, check.stderr
    engine = create_engine(url)
    try:
        assert inspect(engine).get_table_names() == ["cronlease_test_ledger"]
    finally:
        engine.dispose()


def test_a_settings_mistake_exits_2_naming_the_setting_task_and_key(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    bad = 'CRONLEASE = {"TASKS": {"nightly": {"call": "ledgerapp.tasks:attach", "every": "5q"}}}\n'
    manage = write_project(tmp_path, url, bad)
    env = project_env(tmp_path, url, task_name)
    result, check = pythons(
        tmp_path, env, [str(manage), "cronlease", "run"], [str(manage), "check"], timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert "settings.CRONLEASE: task 'nightly', key 'every':" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path(url.removeprefix("sqlite:///")).exists()  # started nothing (nor did check)
    assert check.returncode != 0
    assert "cronlease.E001" in check.stderr and "key 'every'" in check.stderr


ADMIN_SETTINGS = """\
INSTALLED_APPS = [
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", *INSTALLED_APPS,
]
SECRET_KEY = "test-only"
ROOT_URLCONF = "project_urls"
CRONLEASE = {"AUTOSTART": True}
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
"""

ADMIN_URLS = """\
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/cronlease/", include("cronlease.contrib.django.urls")),
    path("admin/", admin.site.urls),
]
"""

#: the admin alone: its index links cronlease's pages, which admin.py serves
ADMIN_ONLY_URLS = """\
from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
"""


def test_the_admin_index_links_the_pages_for_whom_django_permits(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    write_project(tmp_path, url, ADMIN_SETTINGS)
    (tmp_path / "project_urls.py").write_text(ADMIN_URLS)
    (tmp_path / "project_admin_urls.py").write_text(ADMIN_ONLY_URLS)
    env = project_env(tmp_path, url, task_name)
    # one run recorded, for the pages to show, through the statements a replica's run
    # uses (a replica started for it spent seconds starting Django and stopping)
    store = LeaseStore.from_url(url)
    try:
        store.create_tables()
        record_attempts(store, task_name, past_slot(60), ["succeeded"])
    finally:
        store.dispose()
    pages = python(
        tmp_path, env, "-m", "tests.support.django_admin_pages", task_name, "project_admin_urls"
    )
    assert pages.returncode == 0, pages.stderr
    assert pages.stdout.splitlines() == [
        "anonymous 302",  # to the admin's login page
        "tasks 200 shown",
        "history 200 shown",
        "unknown 404",
        "post 405",
        "index linked",  # the admin index lists cronlease's tasks, for a superuser
        "linked 200 shown",
        "staff index unlinked",  # staff without the view permission: not listed, 403
        "staff tasks 403",
        "staff linked 403",
        "granted index linked",  # cronlease.view_taskstatus granted as Django grants any
        "granted tasks 200 shown",
        "admin index linked",  # without the include, the admin serves the pages itself
        "admin tasks 200 shown",
        "admin history 200 shown",
        "admin post 405",
        "admin staff 403",
        "admin granted index linked",
        "started False",  # the test client's requests start no replica, AUTOSTART or not
    ], pages.stdout


def test_autostart_starts_a_replica_in_a_gunicorn_worker_on_its_first_request(
    tmp_path: Path, task_name: str
) -> None:
    url = url_for("sqlite", tmp_path)
    write_project(tmp_path, url, 'CRONLEASE = {"AUTOSTART": True}\nROOT_URLCONF = "ledgerapp"\n')
    (tmp_path / "ledgerapp" / "__init__.py").write_text("urlpatterns = []\n")
    (tmp_path / "project_wsgi.py").write_text(
        "import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project_settings')\n"
        "from django.core.wsgi import get_wsgi_application\napplication = get_wsgi_application()\n"
    )
    ledger.setup(url)
    port = free_port()
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "project_wsgi:application",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
                "--graceful-timeout",
                "30",
            ],
            cwd=tmp_path,
            env=project_env(tmp_path, url, task_name),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # any request starts it (this one is a 404); until one comes the worker runs nothing
        wait_for(lambda: http_status(f"http://127.0.0.1:{port}/"), timeout=30)
        wait_for(lambda: len(ledger.entries(url, task_name)) >= 2, timeout=30)
        pids = {pid for pid, _ in ledger.entries(url, task_name)}
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=40)
    assert code == 0, log.read_text(errors="replace")
    assert server.pid not in pids  # the worker ran it, not the master
    assert_every_slot_once([slot for slot, _ in ledger.entries(url, task_name)])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(address: str) -> int | None:
    try:
        with urllib.request.urlopen(address, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
