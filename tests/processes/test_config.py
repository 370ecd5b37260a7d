"""The config file: every malformed case through the CLI, valid files in process, crontab import."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from cronlease import Scheduler
from cronlease._lease.database import DEFAULT_URL
from cronlease.config import DATABASE_ENV, load_config, translate_crontab
from cronlease.errors import ConfigFileError
from tests.support.procs import ROOT


@dataclass(frozen=True)
class Case:
    text: str | bytes | None  # None: the file does not exist
    fragment: str
    task: str | None = None
    key: str | None = None
    line: int | None = None


def _task(body: str, name: str = "a") -> str:
    return f"[tasks.{name}]\n" + textwrap.dedent(body).lstrip("\n")


CASES: dict[str, Case] = {
    "unknown-key": Case(
        _task('command = "true"\nevry = "5s"\n'), "did you mean 'every'?", "a", "evry", 3
    ),
    "unknown-top-level-key": Case(
        'databse = "sqlite:///x.db"\n', "did you mean 'database'?", None, "databse", 1
    ),
    "missing-schedule": Case(_task('command = "true"\n'), "no schedule", "a", None, 1),
    "both-schedules": Case(
        _task('command = "true"\nevery = "5s"\ncron = "* * * * *"\n'), "not both", "a", "cron", 4
    ),
    "bad-duration": Case(
        _task('command = "true"\nevery = "fivem"\n'), "is not a duration", "a", "every", 3
    ),
    "interval-below-one-second": Case(
        _task('command = "true"\nevery = "500ms"\n'), "at least 1 second", "a", "every", 3
    ),
    "bad-timeout": Case(
        _task('command = "true"\nevery = 5\n\ntimeout = "-3s"\n'),
        "not a duration",
        "a",
        "timeout",
        5,
    ),
    "bad-lease-ttl": Case(
        _task('command = "true"\nevery = 5\nlease_ttl = "2d"\n'),
        "between 1 s and 1 day",
        "a",
        "lease_ttl",
        4,
    ),
    "cron-with-four-fields": Case(
        _task('command = "true"\ncron = "* * * *"\n'), "must have five fields", "a", "cron", 3
    ),
    "cron-field-out-of-range": Case(
        _task('command = "true"\ncron = "61 * * * *"\n'),
        "minute 61 is outside 0-59",
        "a",
        "cron",
        3,
    ),
    "cron-field-garbage": Case(
        _task('command = "true"\ncron = "0 0 * * funday"\n'), "day of week field", "a", "cron", 3
    ),
    "cron-never-fires": Case(
        _task('command = "true"\ncron = "0 0 31 2 *"\n'), "never fires", "a", "cron", 3
    ),
    "unknown-timezone": Case(
        _task('command = "true"\ncron = "0 3 * * *"\ntimezone = "Mars/Olympus"\n'),
        "unknown time zone 'Mars/Olympus'",
        "a",
        "timezone",
        4,
    ),
    "timezone-with-every": Case(
        _task('command = "true"\nevery = "1h"\ntimezone = "Europe/Istanbul"\n'),
        "applies to cron schedules only",
        "a",
        "timezone",
        4,
    ),
    "unimportable-call": Case(
        _task('call = "no_such_module_for_cronlease:run"\nevery = 5\n'),
        "cannot import module 'no_such_module_for_cronlease'",
        "a",
        "call",
        2,
    ),
    "missing-attribute": Case(
        _task('call = "os.path:no_such_function"\nevery = 5\n'), "has no attribute", "a", "call", 2
    ),
    "not-callable": Case(_task('call = "os:sep"\nevery = 5\n'), "not a callable", "a", "call", 2),
    "malformed-call": Case(
        _task('call = "os.path.join"\nevery = 5\n'), "not of the form", "a", "call", 2
    ),
    "call-and-command": Case(
        _task('call = "os.path:join"\ncommand = "true"\nevery = 5\n'),
        "it has call and command",
        "a",
        "command",
        3,
    ),
    "celery-key-on-a-call": Case(
        _task('call = "os.path:join"\nevery = 5\ncelery_options = { queue = "q" }\n'),
        "applies to celery_task tasks only",
        "a",
        "celery_options",
        4,
    ),
    "celery-task-without-its-app": Case(
        _task('celery_task = "proj.tasks.report"\nevery = 5\n'),
        'give the app that sends it: celery_app = "proj.celery:app"',
        "a",
        "celery_task",
        2,
    ),
    "neither-call-nor-command": Case(_task("every = 5\n"), "exactly one of 'call'", "a", None, 1),
    "duplicate-name": Case(
        _task('command = "true"\nevery = 5\n') + "\n" + _task('command = "false"\nevery = 5\n'),
        "declared twice",
        "a",
        None,
        5,
    ),
    "duplicate-name-quoted": Case(
        _task('command = "true"\nevery = 5\n') + _task('command = "true"\nevery = 5\n', '"a"'),
        "declared twice",
        "a",
        None,
        4,
    ),
    "name-with-spaces-around": Case(
        _task('command = "true"\nevery = 5\n', '" a"'), "invalid task name", " a", None, 1
    ),
    "name-with-control-character": Case(
        _task('command = "true"\nevery = 5\n', '"a\\u0007b"'), "control characters", "a\x07b"
    ),
    "name-in-two-unicode-forms": Case(
        _task('command = "true"\nevery = 5\n', '"caf\u00e9"')
        + _task('command = "true"\nevery = 5\n', '"cafe\u0301"'),
        "declared twice",
        "cafe\u0301",
        None,
        4,
    ),
    "name-with-bidi-override": Case(
        _task('command = "true"\nevery = 5\n', '"a\u202eb"'), "U+202E", "a\u202eb", None, 1
    ),
    "name-too-long": Case(
        _task('command = "true"\nevery = 5\n', "n" * 300), "characters long", "n" * 300, None, 1
    ),
    "every-wrong-type": Case(
        _task('command = "true"\nevery = true\n'), "not a boolean", "a", "every", 3
    ),
    "enabled-wrong-type": Case(
        _task('command = "true"\nevery = 5\nenabled = "yes"\n'), "true or false", "a", "enabled", 4
    ),
    "command-wrong-type": Case(
        _task("command = 5\nevery = 5\n"), "string or an array of strings", "a", "command", 2
    ),
    "command-list-wrong-type": Case(
        _task('command = ["ls", 3]\nevery = 5\n'), "non-empty array of strings", "a", "command", 2
    ),
    "command-empty": Case(
        _task('command = "  "\nevery = 5\n'), "must not be empty", "a", "command", 2
    ),
    "command-bad-quoting": Case(
        _task('command = "echo \'oops"\nevery = 5\n'), "cannot be split", "a", "command", 2
    ),
    "env-wrong-type": Case(
        _task('command = "true"\nevery = 5\nenv = { COUNT = 1 }\n'),
        "value of COUNT must be a string",
        "a",
        "env",
        4,
    ),
    "env-bad-name": Case(
        _task('command = "true"\nevery = 5\nenv = { "A-B" = "1" }\n'),
        "not a valid environment variable name",
        "a",
        "env",
        4,
    ),
    "args-wrong-type": Case(
        _task('call = "os.path:join"\nevery = 5\nargs = "x"\n'), "must be an array", "a", "args", 4
    ),
    "kwargs-wrong-type": Case(
        _task('call = "os.path:join"\nevery = 5\nkwargs = [1]\n'),
        "must be a table",
        "a",
        "kwargs",
        4,
    ),
    "shell-wrong-type": Case(
        _task('command = "true"\nevery = 5\nshell = "yes"\n'), "true or false", "a", "shell", 4
    ),
    "shell-with-a-list": Case(
        _task('command = ["ls", "-l"]\nevery = 5\nshell = true\n'),
        "as one string",
        "a",
        "command",
        2,
    ),
    "command-key-on-a-call": Case(
        _task('call = "os.path:join"\nevery = 5\nshell = true\n'),
        "applies to command tasks only",
        "a",
        "shell",
        4,
    ),
    "call-key-on-a-command": Case(
        _task('command = "true"\nevery = 5\nargs = [1]\n'),
        "applies to call and celery_task tasks only",
        "a",
        "args",
        4,
    ),
    "catchup-unknown": Case(
        _task('command = "true"\nevery = 5\ncatchup = "most"\n'),
        "must be one of 'skip', 'latest', 'all'",
        "a",
        "catchup",
        4,
    ),
    "catchup-limit-wrong": Case(
        _task('command = "true"\nevery = 5\ncatchup_limit = 0\n'),
        "whole number from 1 to 1000",
        "a",
        "catchup_limit",
        4,
    ),
    "cwd-missing": Case(
        _task('command = "true"\nevery = 5\ncwd = "no/such/dir"\n'),
        "is not a directory",
        "a",
        "cwd",
        4,
    ),
    "tasks-wrong-type": Case("tasks = 5\n", "must be a table", None, "tasks", 1),
    "task-not-a-table": Case("[tasks]\na = 5\n", "must be a table", "a", None, 2),
    "database-wrong-type": Case("database = 5\n", "must be a URL string", None, "database", 1),
    "database-table-unknown-key": Case(
        '[database]\nurl = "sqlite:///touched.db"\npoolsize = 2\n',
        "did you mean 'pool_size'?",
        None,
        "database.poolsize",
        3,
    ),
    "database-pool-size-zero": Case(
        "[database]\npool_size = 0\n", "at least 1, not 0", None, "database.pool_size", 2
    ),
    "database-overflow-text": Case(
        '[database]\nmax_overflow = "two"\n', "whole number", None, "database.max_overflow", 2
    ),
    "database-idle-timeout-bad": Case(
        '[database]\npool_idle_timeout = "soon"\n',
        "is not a duration",
        None,
        "database.pool_idle_timeout",
        2,
    ),
    "database-connect-args-not-a-table": Case(
        '[database]\nconnect_args = "sslmode=require"\n',
        "must be a table of the driver's connect() arguments",
        None,
        "database.connect_args",
        2,
    ),
    "database-url-parameter": Case(
        '[database]\nurl = "sqlite:///touched.db?pool_size=none"\n',
        "database URL parameter pool_size=none",
        None,
        "database.url",
        2,
    ),
    "database-invalid-url": Case(
        'database = "not a url"\n', "is not a valid URL", None, "database", 1
    ),
    "namespace-invalid": Case('namespace = " app"\n', "white space", None, "namespace", 1),
    "holder-empty": Case('holder = ""\n', "1 to 200 characters", None, "holder", 1),
    "history-keep-zero": Case("history_keep = 0\n", "at least 1", None, "history_keep", 1),
    "history-keep-text": Case(
        'history_keep = "100"\n', "whole number of runs", None, "history_keep", 1
    ),
    "not-toml": Case('[tasks.a]\ncommand = "true"\nevery = \n', "not valid TOML", None, None, 3),
    "not-utf8": Case(b'[tasks.a]\ncommand = "\xff"\n', "not UTF-8"),
    "missing-file": Case(None, "cannot read the config file: No such file"),
}


def _write_case(folder: Path, case: Case) -> Path:
    path = folder / "cronlease.toml"
    if isinstance(case.text, bytes):
        path.write_bytes(case.text)
    elif case.text is not None:
        # Every case names a database, so a test can see it was never created.
        text = case.text
        if "database" not in text:
            text = f'database = "sqlite:///{folder / "touched.db"}"\n' + text
        path.write_text(text)
    return path


#: cases also run as ``python -m cronlease`` itself, the command's real entry point
#: (the others go through tests/support/cli_forks.py: one interpreter start for all)
THROUGH_THE_ENTRY_POINT = ("unknown-key", "missing-file", "unimportable-call")


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, Path]]:
    """Run ``cronlease run`` on every malformed file, each in a process of its own, once
    per test run: the first xdist worker to get here runs them, under a lock in the run's
    shared temporary directory, and leaves the results there for the other."""
    shared = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        shared = shared.parent  # the run's, above each worker's popen-gw<N>
    with (shared / "malformed-configs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = shared / "malformed-configs.json"
        if saved.exists():
            return {
                name: (code, stderr, Path(path))
                for name, (code, stderr, path) in json.loads(saved.read_text()).items()
            }
        results = _run_malformed(tmp_path_factory)
        saved.write_text(json.dumps({name: [c, e, str(p)] for name, (c, e, p) in results.items()}))
        return results


def _run_malformed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, Path]]:
    paths = {name: _write_case(tmp_path_factory.mktemp(name), CASES[name]) for name in CASES}

    def env(folder: Path) -> dict[str, str]:
        # this tree's code, not whatever cronlease the interpreter has installed
        return {"PATH": "/usr/bin:/bin", "HOME": str(folder), "PYTHONPATH": str(ROOT)}

    def run(name: str) -> tuple[str, tuple[int, str, Path]]:
        path = paths[name]
        folder = path.parent
        result = subprocess.run(
            [sys.executable, "-m", "cronlease", "run", "-c", str(path)],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            env=env(folder),
        )
        return name, (result.returncode, result.stderr, path)

    forked = [name for name in CASES if name not in THROUGH_THE_ENTRY_POINT]
    commands = "".join(
        json.dumps(
            {
                "argv": ["run", "-c", str(paths[name])],
                "cwd": str(paths[name].parent),
                "env": env(paths[name].parent),
            }
        )
        + "\n"
        for name in forked
    )
    with ThreadPoolExecutor(len(THROUGH_THE_ENTRY_POINT)) as pool:
        direct = pool.map(run, THROUGH_THE_ENTRY_POINT)
        forks = subprocess.run(
            [sys.executable, "-m", "tests.support.cli_forks"],
            cwd=ROOT,
            input=commands,
            capture_output=True,
            text=True,
            timeout=120,
            env=env(ROOT),
        )
        results = dict(direct)
    assert forks.returncode == 0, forks.stderr
    replies = [json.loads(line) for line in forks.stdout.splitlines()]
    assert len(replies) == len(forked), forks.stdout
    for name, reply in zip(forked, replies, strict=True):
        results[name] = (reply["code"], reply["stderr"], paths[name])
    return results


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_config_is_one_line_exit_2_and_nothing_starts(
    name: str, cli_results: dict[str, tuple[int, str, Path]]
) -> None:
    case = CASES[name]
    returncode, stderr, path = cli_results[name]
    assert returncode == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("cronlease: error: "), stderr
    message = stderr.strip()
    assert case.fragment in message
    line = case.line
    if line is not None and isinstance(case.text, str) and "database" not in case.text:
        line += 1  # the database line the test put first
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(f"cronlease: error: {where}"), message
    if case.task is not None:
        assert f"task {case.task!r}" in message
    if case.key is not None:
        assert f"key {case.key!r}" in message
    assert not (path.parent / "touched.db").exists()
    assert not (path.parent / "cronlease.db").exists()


# --- valid files, in process ------------------------------------------------------


def test_a_full_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    (tmp_path / "work").mkdir()
    path = tmp_path / "cronlease.toml"
    path.write_text(
        textwrap.dedent(
            """
            database = "postgresql://app@db/app"
            namespace = "shop"
            holder = "web-1"

            [tasks.purge]
            call = "os.path:join"
            every = "5m"
            args = ["a", "b"]
            kwargs = {}
            lease_ttl = "30s"

            [tasks."nightly backup"]
            command = "pg_dump -Fc 'my app'"
            cron = "0 2 * * 1-5"
            timezone = "Europe/Istanbul"
            timeout = "30m"
            cwd = "work"
            env = { PGHOST = "db" }

            [tasks.pipeline]
            command = "ls | wc -l"
            shell = true
            every = 60
            enabled = false

            [tasks.listed]
            command = ["echo", "two words"]
            every = "1h30m"
            catchup = "all"
            catchup_limit = 3
            """
        )
    )
    config = load_config(path)
    assert config.database == "postgresql://app@db/app" and config.database_source == "file"
    assert config.namespace == "shop" and config.holder == "web-1"
    assert list(config.tasks) == ["purge", "nightly backup", "pipeline", "listed"]
    purge = config.tasks["purge"]
    assert purge.kind == "call" and purge.func is not None and purge.func("x", "y") == "x/y"
    assert purge.args == ("a", "b") and purge.lease_ttl == 30.0 and purge.line == 6
    assert str(purge.schedule) == "every 5m"
    backup = config.tasks["nightly backup"]
    assert backup.command == ("pg_dump", "-Fc", "my app") and not backup.shell
    assert backup.schedule.timezone == "Europe/Istanbul" and backup.timeout == 1800.0
    assert backup.cwd == str((tmp_path / "work").resolve()) and backup.env == {"PGHOST": "db"}
    assert config.tasks["pipeline"].command == "ls | wc -l" and not config.tasks["pipeline"].enabled
    assert config.tasks["listed"].command == ("echo", "two words")
    assert (config.tasks["listed"].catchup, config.tasks["listed"].catchup_limit) == ("all", 3)
    assert config.full_name("purge") == "shop:purge"

    scheduler = Scheduler(f"sqlite:///{tmp_path / 'x.db'}", namespace=config.namespace)
    for spec in config.tasks.values():
        spec.add_to(scheduler)
    assert scheduler.get_task("nightly backup").full_name == "shop:nightly backup"
    assert scheduler.get_task("purge").lease_ttl == 30.0
    assert scheduler.get_task("listed").catchup == "all"
    scheduler.store.dispose()


def test_history_keep_bounds_the_runs_kept_per_task(tmp_path: Path) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text("history_keep = 500\n")
    assert load_config(path).history_keep == 500
    path.write_text("")
    assert load_config(path).history_keep is None


def test_database_comes_from_the_environment_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text('database = "sqlite:///file.db"\n')
    monkeypatch.setenv(DATABASE_ENV, "postgresql://env@db/app")
    config = load_config(path)
    assert (config.database, config.database_source) == ("postgresql://env@db/app", "environment")
    monkeypatch.setenv(DATABASE_ENV, "::not a url::")
    with pytest.raises(ConfigFileError, match=DATABASE_ENV):
        load_config(path)
    monkeypatch.delenv(DATABASE_ENV)
    path.write_text("")  # the default file, next to the config file as a relative path is
    assert DEFAULT_URL == "sqlite:///cronlease.db"
    assert load_config(path).database == f"sqlite:///{tmp_path.resolve() / 'cronlease.db'}"


def test_calls_import_from_the_config_directory_and_can_be_skipped(tmp_path: Path) -> None:
    module = f"jobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("def job():\n    return 'ran'\n")
    path = tmp_path / "cronlease.toml"
    path.write_text(f'[tasks.a]\ncall = "{module}:job"\nevery = 5\n')
    assert load_config(path).tasks["a"].function()() == "ran"
    path.write_text('[tasks.a]\ncall = "not_importable_here:job"\nevery = 5\n')
    spec = load_config(path, import_calls=False).tasks["a"]
    assert spec.func is None and spec.target == "not_importable_here:job"


def test_check_binds_args_and_kwargs_to_the_calls_signature(tmp_path: Path) -> None:
    module = f"purges_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("def purge(days):\n    pass\n")
    path = tmp_path / "cronlease.toml"
    database = tmp_path / "never.db"
    head = f'database = "sqlite:///{database}"\n[tasks.purge]\ncall = "{module}:purge"\n'

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cronlease", "check", "-c", str(path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        )

    path.write_text(head + 'every = "1h"\nkwargs = { dayz = 3 }\n')
    result = check()
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"cronlease: error: {path}:5: task 'purge', key 'kwargs': purge() got an unexpected "
        "keyword argument 'dayz'; did you mean 'days'?\n"
    )
    assert result.stdout == "" and not database.exists()
    path.write_text(head + 'every = "1h"\nargs = [30]\n')
    result = check()
    assert result.returncode == 0, result.stderr
    assert f"{path}: OK, 1 task(s)" in result.stdout


def test_an_async_call_with_a_timeout_is_cancelled_and_recorded_timed_out(tmp_path: Path) -> None:
    module = f"ajobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            import asyncio
            seen = []

            async def slow(ctx, seconds):
                seen.append(ctx.name)
                await asyncio.sleep(seconds)
            """
        )
    )
    path = tmp_path / "cronlease.toml"
    path.write_text(
        f'[tasks.slow]\ncall = "{module}:slow"\nevery = "1h"\ntimeout = 0.2\nargs = [30]\n'
        f'[tasks.quick]\ncall = "{module}:slow"\nevery = "1h"\ntimeout = 5\nargs = [0]\n'
    )
    config = load_config(path)
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'db.sqlite'}")
    for spec in config.tasks.values():
        spec.add_to(scheduler)
    try:
        assert scheduler.run_now("slow") == "timed_out"
        assert scheduler.run_now("quick") == "succeeded"
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
    assert sys.modules[module].seen == ["slow", "quick"]


# --- crontab import ---------------------------------------------------------------


CRONTAB = r"""
# m h dom mon dow command
SHELL=/bin/sh
MAILTO=ops@example.com
PATH=/usr/local/bin:/usr/bin:/bin
*/5 * * * * /usr/local/bin/sync-orders --quiet
0 3 * * 1-5 pg_dump app > /backups/app.sql
@daily /usr/local/bin/sync-orders --full
@reboot /usr/local/bin/start-thing
0 4 * * * echo "%H" | mail -s report ops
15 2 * * * date +\%F >> /var/log/dates
61 * * * * broken-minute
CRON_TZ=Europe/Istanbul
SHELL=/bin/bash
30 1 * * sun backup.sh
"""


def test_crontab_translation_loads_as_an_equivalent_config(tmp_path: Path) -> None:
    result = translate_crontab(CRONTAB, source="crontab", timezone="America/New_York")
    path = tmp_path / "cronlease.toml"
    path.write_text(result.toml)
    config = load_config(path)
    tasks = config.tasks
    assert list(tasks) == ["sync-orders", "pg-dump", "sync-orders-2", "date", "backup-sh"]
    assert tasks["sync-orders"].schedule.expression == "*/5 * * * *"
    assert tasks["sync-orders"].schedule.timezone == "America/New_York"
    assert tasks["sync-orders"].command == "/usr/local/bin/sync-orders --quiet"
    assert tasks["sync-orders"].shell
    assert tasks["sync-orders"].env == {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert tasks["sync-orders-2"].schedule.expression == "0 0 * * *"
    assert tasks["date"].command == "date +%F >> /var/log/dates"
    backup = tasks["backup-sh"]
    assert backup.schedule.timezone == "Europe/Istanbul"
    assert backup.command == ("/bin/bash", "-c", "backup.sh") and not backup.shell
    assert result.tasks == 5
    problems = "\n".join(result.problems)
    assert len(result.problems) == 3
    assert "crontab:9: not translated (@reboot" in problems
    assert "crontab:10: not translated (an unescaped %" in problems
    assert "crontab:12: not translated" in problems and "minute 61" in problems
    assert any("MAILTO dropped" in note for note in result.notes)


def test_system_crontab_user_column(tmp_path: Path) -> None:
    result = translate_crontab(
        "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n"
        "25 6 * * * www-data /srv/app/bin/cleanup\n",
        system=True,
    )
    path = tmp_path / "cronlease.toml"
    path.write_text(result.toml)
    tasks = load_config(path).tasks
    assert tasks["cron-hourly"].command == "cd / && run-parts --report /etc/cron.hourly"
    assert tasks["cleanup"].command == "/srv/app/bin/cleanup"
    assert "ran as user 'www-data'" in result.toml
    assert not result.problems
    assert any("root, www-data" in note for note in result.notes)
