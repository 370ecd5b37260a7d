"""``cronlease import-celery-beat`` as a real process, on a real Celery app and on a real
django-celery-beat database (SQLite, its own migrations, rows made through its models).

What it prints is read back by cronlease's own config loader, and the schedules it
declares fire when Celery's own ``is_due`` says the entry is due, over a week in Paris
with a daylight-saving change. An entry that cannot be translated faithfully is exit 2
and nothing written; ``--partial`` writes the others, each refused one a comment.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import skip_or_fail
from tests.support.procs import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _require(module: str, name: str) -> None:
    problem = None if importlib.util.find_spec(module) else f"{name} is not installed"
    skip_or_fail(name, problem)


_require("celery", "celery")

from celery.schedules import crontab, maybe_schedule  # noqa: E402

from cronlease.config import load_config  # noqa: E402
from tests.unit.test_celery_beat import beat_fires_after  # noqa: E402

#: real processes: seconds each (the three take about 10 s)
pytestmark = pytest.mark.slow

ZONE = "Europe/Paris"
#: the weeks of Paris's two daylight-saving changes in 2026 (29 March, 25 October)
WEEKS = (datetime(2026, 3, 25, tzinfo=timezone.utc), datetime(2026, 10, 21, tzinfo=timezone.utc))
CRONTABS: dict[str, dict[str, Any]] = {
    "at-two-thirty": {"minute": 30, "hour": 2},  # in the hour skipped, then repeated
    "quarter-hours": {"minute": "*/15"},
    "weekday-mornings": {"minute": 0, "hour": 9, "day_of_week": "mon-fri"},
    "early-hours": {"minute": 5, "hour": "1-3"},
    "month-days": {"minute": 0, "hour": 0, "day_of_month": "1,25,29"},
}


@pytest.fixture(autouse=True)
def _leave_nothing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test apps this process imports (the loader puts their folder on sys.path) go
    when the test ends."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("beat_app_"):
            del sys.modules[name]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONLEASE_", "DJANGO_"))}
    env["PYTHONPATH"] = str(ROOT)  # this tree's cronlease; the cwd is put on sys.path by it
    return env


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlease", "import-celery-beat", *args],
        cwd=cwd,
        env={**_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_app(folder: Path, entries: str) -> str:
    """A Celery app module in ``folder`` (a name of its own: this process imports it too,
    to load the output); its ``module:attribute``."""
    module = f"beat_app_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(
        textwrap.dedent(
            f"""\
            from datetime import timedelta
            from celery import Celery
            from celery.schedules import crontab, schedule, solar

            class Lunar(schedule):
                pass

            app = Celery("{module}", broker="memory://", set_as_current=False)
            app.conf.timezone = {ZONE!r}
            app.conf.beat_schedule = {{
            """
        )
        + textwrap.indent(textwrap.dedent(entries), "    ")
        + "}\n"
    )
    return f"{module}:app"


APP_ENTRIES = (
    "".join(
        f'"{name}": {{"task": "proj.{name}", "schedule": crontab(**{spec!r})}},\n'
        for name, spec in CRONTABS.items()
    )
    + """\
    "seconds": {"task": "proj.add", "schedule": 10.0, "args": (2, 3)},
    "delta": {"task": "proj.td", "schedule": timedelta(minutes=90), "kwargs": {"x": "y"}},
    "schedule": {
        "task": "proj.sched",
        "schedule": schedule(run_every=timedelta(seconds=2.5)),
        "options": {"queue": "reports", "priority": 5, "headers": {"h": "v"}},
    },
    """
)

REFUSED_ENTRIES = """\
    "both-days": {"task": "proj.x", "schedule": crontab(0, 3, day_of_month=1, day_of_week=1)},
    "sunrise": {"task": "proj.x", "schedule": solar("sunrise", 48.85, 2.35)},
    "lunar": {"task": "proj.x", "schedule": Lunar(run_every=60)},
    """


def celery_schedules(target: str) -> dict[str, Any]:
    """The app's own schedule objects, by entry (imported by the loader already)."""
    module, attribute = target.split(":")
    app = getattr(sys.modules[module], attribute)
    return {name: entry["schedule"] for name, entry in app.conf.beat_schedule.items()}


def assert_fires_as_celery(spec: Any, entry: Any, app: Any) -> tuple[int, int]:
    """Every fire time of ``spec`` over each week, the days of the daylight-saving changes
    included, is when Celery's ``is_due`` (driven as beat drives it) runs ``entry`` next;
    but within the changing hours, where cronlease follows cron's rules (a time in the
    skipped hour runs at its end, a fixed time once in the repeated hour) and beat's
    answer depends on how often it polls (docs/how-to/celery-beat.md). The counts
    compared: in all, and on the days of the changes."""
    tz = ZoneInfo(ZONE)
    box: dict[str, datetime] = {}
    theirs = crontab(
        minute=entry._orig_minute,
        hour=entry._orig_hour,
        day_of_week=entry._orig_day_of_week,
        day_of_month=entry._orig_day_of_month,
        month_of_year=entry._orig_month_of_year,
        app=app,
        nowfun=lambda: box["now"],
    )
    compared = on_change_days = 0
    for week in WEEKS:
        changes = {
            day
            for day in (week.date() + timedelta(days=n) for n in range(8))
            if datetime(day.year, day.month, day.day, tzinfo=tz).utcoffset()
            != (datetime(day.year, day.month, day.day, tzinfo=tz) + timedelta(days=1)).utcoffset()
        }
        assert len(changes) == 1  # the week has its change (02:00 to 03:00 in Paris)

        def changing(moment: datetime, changes: set[Any] = changes) -> bool:
            local = moment.astimezone(tz)
            return local.date() in changes and 1 <= local.hour < 4

        last = spec.schedule.next_fire_time(week)
        while last < week + timedelta(days=7):
            expected = spec.schedule.next_fire_time(last)
            if not changing(last) and not changing(expected):
                local = last.astimezone(tz)
                beat = beat_fires_after(theirs, box, local)
                # instants compared: a time in the repeated hour equals no time of
                # another zone in Python's comparison, whatever its instant
                assert beat.timestamp() == expected.timestamp(), (spec.name, local)
                compared += 1
                on_change_days += local.date() in changes
            last = expected
    return compared, on_change_days


def test_an_app_prints_its_celery_table_and_runs_what_celery_runs(tmp_path: Path) -> None:
    target = write_app(tmp_path, APP_ENTRIES)
    result = cli(target, "-o", "cronlease.toml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "cronlease.toml").read_text()
    assert tomllib.loads(text) == {"celery": {"app": target}}  # the rest is comments
    assert '#   at-two-thirty: cron = "30 2 * * *", timezone = "Europe/Paris"' in text
    assert "#   seconds: every = 10 -> sends proj.add, args (2, 3)" in text

    config = load_config(tmp_path / "cronlease.toml")
    assert sorted(config.tasks) == sorted([*CRONTABS, "seconds", "delta", "schedule"])
    ours = celery_schedules(target)
    app = sys.modules[target.split(":")[0]].app
    counts = [assert_fires_as_celery(config.tasks[name], ours[name], app) for name in CRONTABS]
    assert sum(count for count, _ in counts) > 1300
    assert sum(on_change_days for _, on_change_days in counts) > 150
    for name, seconds in (("seconds", 10), ("delta", 5400), ("schedule", 2.5)):
        spec = config.tasks[name]
        assert spec.schedule.kind == "every"
        assert spec.schedule.interval == timedelta(seconds=seconds)
        assert maybe_schedule(ours[name]).run_every == spec.schedule.interval


def test_an_entry_not_translated_is_exit_2_and_partial_writes_the_others(tmp_path: Path) -> None:
    target = write_app(tmp_path, APP_ENTRIES + REFUSED_ENTRIES)
    refused = cli(target, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    for name, why in (
        ("both-days", "crontab restricts both day_of_month (1) and day_of_week (1)"),
        ("sunrise", "solar schedules ('sunrise' at 48.85, 2.35) are not supported"),
        ("lunar", "Lunar is not a schedule cronlease can translate"),
    ):
        assert f"beat entry {name!r}, key 'schedule': {why}" in refused.stderr
    assert "3 entries of the beat_schedule of" in refused.stderr

    partial = cli(target, "--partial", cwd=tmp_path)
    assert partial.returncode == 0, partial.stderr
    assert "3 entries of the beat_schedule" in partial.stderr and "left out" in partial.stderr
    assert partial.stdout.count("# NOT TRANSLATED: beat entry") == 3
    (tmp_path / "partial.toml").write_text(partial.stdout)
    tables = tomllib.loads(partial.stdout)["tasks"]
    assert tables["schedule"] == {
        "every": 2.5,
        "celery_task": "proj.sched",
        "celery_app": target,
        "celery_options": {"queue": "reports", "priority": 5, "headers": {"h": "v"}},
        "recover": True,
    }
    assert tables["seconds"]["args"] == [2, 3] and tables["delta"]["kwargs"] == {"x": "y"}

    config = load_config(tmp_path / "partial.toml")
    assert sorted(config.tasks) == sorted([*CRONTABS, "seconds", "delta", "schedule"])
    sent = config.tasks["schedule"]
    assert sent.kind == "send" and sent.sends == f"proj.sched via Celery app {target}"
    sender = sent.function().sender  # type: ignore[attr-defined]
    assert (sender.task, sender.options["queue"]) == ("proj.sched", "reports")
    assert config.tasks["seconds"].function().sender.args == (2, 3)  # type: ignore[attr-defined]
    assert config.tasks["seconds"].recover
    ours = celery_schedules(target)
    app = sys.modules[target.split(":")[0]].app
    assert assert_fires_as_celery(config.tasks["early-hours"], ours["early-hours"], app)[0] > 30

    only_refused = write_app(tmp_path, REFUSED_ENTRIES)
    nothing = cli(only_refused, "--partial", cwd=tmp_path)
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert "no entry of the beat_schedule" in nothing.stderr


# --- django-celery-beat ---------------------------------------------------------------------

SETTINGS = """\
SECRET_KEY = "test"
INSTALLED_APPS = ["django_celery_beat"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "beat.sqlite3"}}
USE_TZ = True
TIME_ZONE = "UTC"
"""

#: run in a process of its own (Django is set up once per process): the schema, by
#: django-celery-beat's own migrations, and one row of each kind through its models
ROWS = """\
import django, json
from datetime import datetime, timedelta, timezone
django.setup()
from django.core.management import call_command
call_command("migrate", "django_celery_beat", verbosity=0)
from django_celery_beat.models import (
    ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule
)
now = datetime.now(timezone.utc)
every30 = IntervalSchedule.objects.create(every=30, period=IntervalSchedule.SECONDS)
hours = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.HOURS)
nightly = CrontabSchedule.objects.create(minute="30", hour="2", timezone="Europe/Paris")
weekdays = CrontabSchedule.objects.create(
    minute="0", hour="9", day_of_week="mon-fri", timezone="America/New_York"
)
both = CrontabSchedule.objects.create(
    minute="0", hour="3", day_of_month="1", day_of_week="1", timezone="UTC"
)
make = PeriodicTask.objects.create
make(name="every-30s", task="proj.add", interval=every30, args=json.dumps([1, 2]),
     queue="q", priority=3, headers=json.dumps({"h": "v"}), expire_seconds=60)
make(name="two-hourly", task="proj.sweep", interval=hours, exchange="ex", routing_key="rk")
make(name="nightly report", task="proj.report", crontab=nightly, kwargs=json.dumps({"a": 1}))
make(name="weekdays", task="proj.weekday", crontab=weekdays,
     start_time=now - timedelta(days=3))
make(name="both-days", task="proj.x", crontab=both)
make(name="paused", task="proj.x", interval=every30, enabled=False)
make(name="expired", task="proj.x", interval=every30, expires=now - timedelta(days=1))
make(name="ends-later", task="proj.x", interval=every30, expires=now + timedelta(days=1))
make(name="starts-later", task="proj.x", interval=every30, start_time=now + timedelta(days=1))
make(name="once", task="proj.x", interval=every30, one_off=True)
make(name="sunset", task="proj.x",
     solar=SolarSchedule.objects.create(event="sunset", latitude=48.85, longitude=2.35))
make(name="clocked", task="proj.x",
     clocked=ClockedSchedule.objects.create(clocked_time=now + timedelta(days=2)), one_off=True)
make(name="null-arg", task="proj.x", interval=every30, args=json.dumps([None]))
make(name="bad-json", task="proj.x", interval=every30)
PeriodicTask.objects.filter(name="bad-json").update(args="[1,")  # as a hand-edited row
"""


def test_django_celery_beat_rows_are_tables_and_each_bad_row_costs_its_entry(
    tmp_path: Path,
) -> None:
    _require("django_celery_beat", "django-celery-beat")
    settings = f"settings_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{settings}.py").write_text(SETTINGS)
    target = write_app(tmp_path, "")
    env = {**_env(), "DJANGO_SETTINGS_MODULE": settings, "PYTHONPATH": f"{ROOT}:{tmp_path}"}
    made = subprocess.run(
        [sys.executable, "-c", ROWS], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr

    unmigrated = f"{settings}_empty"
    (tmp_path / f"{unmigrated}.py").write_text(SETTINGS.replace("beat.sqlite3", "empty.sqlite3"))
    unread = cli(target, "--django", "--settings", unmigrated, cwd=tmp_path)
    assert unread.returncode == 1 and unread.stdout == ""
    assert "cannot read django-celery-beat's periodic tasks: no such table" in unread.stderr
    assert "manage.py migrate django_celery_beat" in unread.stderr

    no_settings = cli(target, "--django", cwd=tmp_path)
    assert no_settings.returncode == 2
    assert "give --settings MODULE or set DJANGO_SETTINGS_MODULE" in no_settings.stderr

    refused = cli(target, "--django", "--settings", settings, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    reasons = {
        "both-days": "restricts both day_of_month (1) and day_of_week (1)",
        "ends-later": "beat stops sending it then; cronlease has no end date",
        "starts-later": "is in the future: cronlease has no start date",
        "once": "one_off: beat sends it once and then disables it",
        "sunset": "solar schedule (sunset at 48.85, 2.35)",
        "clocked": "clocked schedule (once at ",
        "null-arg": "args: null (None) has no TOML form",
        "bad-json": "args is not JSON",
    }
    for name, why in reasons.items():
        assert f"django-celery-beat: row {name!r} not translated: " in refused.stderr, name
        line = next(x for x in refused.stderr.splitlines() if f"row {name!r} not" in x)
        assert why in line, line
    assert "row 'paused' left out as a comment: disabled" in refused.stderr
    assert "row 'expired' left out as a comment: expired at" in refused.stderr
    assert "8 entries of django-celery-beat cannot be translated" in refused.stderr

    # the settings as Django's convention has them too: DJANGO_SETTINGS_MODULE
    partial = cli(
        target,
        "--django",
        "--partial",
        "-o",
        "beat.toml",
        cwd=tmp_path,
        DJANGO_SETTINGS_MODULE=settings,
    )
    assert partial.returncode == 0, partial.stderr
    text = (tmp_path / "beat.toml").read_text()
    assert text.count("# NOT TRANSLATED row") == len(reasons)
    assert text.count("# LEFT OUT row") == 2
    tables = tomllib.loads(text)["tasks"]
    assert sorted(tables) == ["every-30s", "nightly report", "two-hourly", "weekdays"]
    assert tables["every-30s"] == {
        "every": 30,
        "celery_task": "proj.add",
        "celery_app": target,
        "args": [1, 2],
        # as DatabaseScheduler passes them to send_task
        "celery_options": {
            "queue": "q",
            "priority": 3,
            "expires": 60,
            "headers": {"h": "v", "periodic_task_name": "every-30s"},
        },
        "recover": True,
    }
    assert tables["two-hourly"]["every"] == 7200
    assert tables["two-hourly"]["celery_options"] == {
        "exchange": "ex",
        "routing_key": "rk",
        "headers": {"periodic_task_name": "two-hourly"},
    }
    assert tables["nightly report"]["cron"] == "30 2 * * *"
    assert tables["nightly report"]["timezone"] == "Europe/Paris"  # the row's zone, not the app's
    assert tables["nightly report"]["kwargs"] == {"a": 1}
    assert (tables["weekdays"]["cron"], tables["weekdays"]["timezone"]) == (
        "0 9 * * 1,2,3,4,5",
        "America/New_York",
    )

    config = load_config(tmp_path / "beat.toml")
    assert sorted(config.tasks) == sorted(tables)
    nightly = config.tasks["nightly report"]
    assert nightly.kind == "send" and nightly.schedule.timezone == "Europe/Paris"
    app = sys.modules[target.split(":")[0]].app
    assert assert_fires_as_celery(nightly, crontab(minute="30", hour="2"), app)[0] >= 10
