"""``cronlease import-celery-beat``: a Celery beat schedule as an equivalent ``cronlease.toml``.

Two sources:

- **an app's** ``beat_schedule`` (:func:`translate_app`). ``[celery] app = "..."`` already
  runs it, every entry translated when the file is loaded, its arguments and options
  as they are in Python (what TOML cannot hold included). So that is the output: the
  ``[celery]`` table, and what each entry becomes as a comment, for review. ``[celery]``
  runs every entry or refuses the app, so an app with an entry that cannot be translated
  is refused (every such entry named); with ``partial``, the entries that can are written
  out one by one as ``[tasks.NAME]`` tables that send through the app (``celery_task``),
  and the others stay as comments.
- **django-celery-beat's** ``PeriodicTask`` rows (:func:`translate_django`): the schedule
  is in the database, not in the app, so each row is a ``[tasks.NAME]`` table sending its
  task through the app, with the row's arguments and options as ``DatabaseScheduler``
  passes them (``periodic_task_name`` header included). A disabled row, or one whose
  ``expires`` is past (beat disables it), is a comment and a note; a one-off, clocked or
  solar row, one starting in the future or expiring later, is refused naming the row. One
  bad row costs its entry, never the others.

Schedules are translated as ``[celery]`` translates them
(:mod:`cronlease._send.celery_beat`): never a silently different one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from cronlease._lease.model import check_task_name
from cronlease._options import parse_options
from cronlease._send.celery_beat import (
    CelerySender,
    beat_entry,
    beat_table,
    crontab_fields,
    zone_name,
)
from cronlease._timing.schedule import Schedule
from cronlease.config._celery import import_app
from cronlease.config._crontab import toml_comment, toml_string
from cronlease.errors import ConfigError

__all__ = ["BeatImport", "translate_app", "translate_django"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Untranslatable(Exception):
    """One entry cannot be written faithfully: the message says why."""


@dataclass
class BeatImport:
    """The TOML text, the number of tasks it declares (or runs, through ``[celery]``), one
    message per entry not translated and notes (disabled rows, say)."""

    toml: str
    tasks: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    """One entry as a ``[tasks.NAME]`` table sends it."""

    name: str
    schedule: Mapping[str, Any]
    task: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def check(self, app: Any) -> None:
        """Untranslatable unless the config loader will accept this table as written."""
        try:
            check_task_name(self.name)
            parse_options(dict(self.schedule))
            CelerySender(app, self.task, tuple(self.args), self.kwargs, self.options)
        except ConfigError as exc:
            raise Untranslatable(str(exc)) from None
        _value(list(self.args), "args")
        _value(dict(self.kwargs), "kwargs")
        _value(dict(self.options), "options")


# --- an app's beat_schedule ---------------------------------------------------------------


def translate_app(target: str, *, partial: bool = False) -> BeatImport:
    """The app ``target`` ("proj.celery:app")'s ``beat_schedule`` as a ``cronlease.toml``."""
    app = import_app(target)
    where = f"the beat_schedule of {target}"
    entries: list[_Entry] = []
    problems: list[str] = []
    refused: list[tuple[str, str]] = []
    for name, raw in beat_table(app).items():
        try:
            translated = beat_entry(app, name, raw)
            entry = _Entry(
                translated.name,
                translated.schedule,
                translated.sender.task,
                translated.sender.args,
                translated.sender.kwargs,
                translated.sender.options,
            )
            check_task_name(entry.name)
            parse_options(dict(entry.schedule))
        except ConfigError as exc:
            text = str(exc)
            if not text.startswith("beat entry"):
                text = f"beat entry {name!r}: {text}"
            problems.append(f"{where}: not translated: {text}")
            refused.append((str(name), text))
            continue
        entries.append(entry)

    if not problems:
        header = _header(where, tables=False)
        out = ["", "[celery]", f"app = {toml_string(target)}"]
        if entries:
            out += ["", "# what cronlease runs from it (`cronlease check` lists the same):"]
            out += [f"#   {toml_comment(_summary(entry))}" for entry in entries]
        else:
            out += ["# its beat_schedule is empty: nothing runs yet"]
        return BeatImport("\n".join(header + out) + "\n", len(entries), problems)
    if not partial:
        return BeatImport("", 0, problems)

    # [celery] would refuse the app: the entries that translate, one table each
    header = _header(where, tables=True)
    out = [
        "",
        f"# [celery] app = {toml_string(target)} would refuse this app (its entries below marked",
        "# NOT TRANSLATED): the others are written out as tables that send through it.",
    ]
    written = 0
    for entry in entries:
        try:
            entry.check(app)
        except Untranslatable as exc:
            text = f"beat entry {entry.name!r}: {exc}"
            problems.append(f"{where}: not translated: {text}")
            refused.append((entry.name, text))
            continue
        out += ["", *_table(entry, target)]
        written += 1
    for _name, text in refused:
        out += ["", f"# NOT TRANSLATED: {toml_comment(text)}"]
    return BeatImport("\n".join(header + out) + "\n", written, problems)


# --- django-celery-beat's rows ------------------------------------------------------------


def translate_django(target: str, *, partial: bool = False) -> BeatImport:
    """django-celery-beat's ``PeriodicTask`` rows as ``[tasks.NAME]`` tables that send
    through the app ``target``; Django must be set up (``django.setup()``) first."""
    from django.apps import apps
    from django.conf import settings

    if not apps.is_installed("django_celery_beat"):
        raise ConfigError("django_celery_beat is not in INSTALLED_APPS: no rows to read")
    from django_celery_beat.models import PeriodicTask

    app = import_app(target)
    tz_aware = bool(getattr(settings, "DJANGO_CELERY_BEAT_TZ_AWARE", True))
    rows = list(
        PeriodicTask.objects.select_related("interval", "crontab", "solar", "clocked").order_by(
            "name"
        )
    )
    where = "django-celery-beat"
    now = datetime.now(timezone.utc)
    problems: list[str] = []
    notes: list[str] = []
    out: list[str] = []
    written = 0
    for row in rows:
        name = str(row.name)
        try:
            skipped = _dead(row, now)
            if skipped is not None:
                notes.append(f"{where}: row {name!r} left out as a comment: {skipped}")
                out += ["", f"# LEFT OUT row {toml_comment(repr(name))}: {toml_comment(skipped)}"]
                continue
            entry = _row_entry(row, app, tz_aware, now)
            entry.check(app)
        except Exception as exc:  # one bad row costs its entry, never the batch
            reason = (
                str(exc)
                if isinstance(exc, (Untranslatable, ConfigError))
                else (f"{type(exc).__name__}: {exc}")
            )
            problems.append(f"{where}: row {name!r} not translated: {reason}")
            out += ["", f"# NOT TRANSLATED row {toml_comment(repr(name))}: {toml_comment(reason)}"]
            continue
        out += ["", f"# django-celery-beat row {toml_comment(repr(name))}", *_table(entry, target)]
        written += 1
    if problems and not partial:
        return BeatImport("", 0, problems, notes)
    header = _header(f"django-celery-beat's periodic tasks (sent through {target})", tables=True)
    if not rows:
        out += ["", "# no periodic tasks in django-celery-beat's table"]
    return BeatImport("\n".join(header + out) + "\n", written, problems, notes)


def _dead(row: Any, now: datetime) -> str | None:
    """Why beat would never send this row again, or None."""
    if not row.enabled:
        return "disabled"
    expires = row.expires
    if expires is not None and _aware(expires) <= now:
        return f"expired at {_aware(expires).isoformat()} (beat disables it)"
    return None


def _row_entry(row: Any, app: Any, tz_aware: bool, now: datetime) -> _Entry:
    name = str(row.name)
    schedule = _row_schedule(row, app, tz_aware)  # first: a clocked row is one_off too
    if row.one_off:
        raise Untranslatable(
            "one_off: beat sends it once and then disables it; cronlease has no run-once "
            "schedule (`cronlease trigger` runs a task once by hand)"
        )
    if row.start_time is not None and _aware(row.start_time) > now:
        raise Untranslatable(
            f"start_time {_aware(row.start_time).isoformat()} is in the future: cronlease "
            "has no start date (import it once it has started)"
        )
    if row.expires is not None:
        raise Untranslatable(
            f"expires at {_aware(row.expires).isoformat()}: beat stops sending it then; "
            "cronlease has no end date"
        )
    options: dict[str, Any] = {}
    # what DatabaseScheduler's ModelEntry passes to send_task, in its order
    for key in ("queue", "exchange", "routing_key", "priority"):
        value = getattr(row, key)
        if value is not None:
            options[key] = value
    if row.expire_seconds:
        options["expires"] = row.expire_seconds
    headers = _json(row.headers, "headers", dict)
    headers["periodic_task_name"] = name
    options["headers"] = headers
    return _Entry(
        name,
        schedule,
        str(row.task),
        _json(row.args, "args", list),
        _json(row.kwargs, "kwargs", dict),
        options,
    )


def _row_schedule(row: Any, app: Any, tz_aware: bool) -> dict[str, Any]:
    if row.interval is not None:
        interval = row.interval
        return {"every": timedelta(**{str(interval.period): interval.every})}
    if row.crontab is not None:
        expression = crontab_fields(row.crontab.schedule, str(row.name))
        if tz_aware:  # the row's own zone (TzAwareCrontab), else the app's
            zone = str(row.crontab.timezone)
            Schedule.cron(expression, timezone=zone)  # ConfigError for a zone cron lacks
        else:
            zone = zone_name(app, str(row.name))
        return {"cron": expression, "timezone": zone}
    if row.solar is not None:
        solar = row.solar
        raise Untranslatable(
            f"solar schedule ({solar.event} at {float(solar.latitude):g}, "
            f"{float(solar.longitude):g}): cronlease "
            "has no sunrise/sunset schedule"
        )
    if row.clocked is not None:
        raise Untranslatable(
            f"clocked schedule (once at {_aware(row.clocked.clocked_time).isoformat()}): "
            "cronlease has no run-once schedule"
        )
    raise Untranslatable("it has no schedule")


def _json(text: str | None, key: str, kind: type) -> Any:
    try:
        value = json.loads(text or ("[]" if kind is list else "{}"))
    except ValueError as exc:
        raise Untranslatable(f"{key} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise Untranslatable(f"{key} must be a JSON {'array' if kind is list else 'object'}")
    return value


def _aware(moment: datetime) -> datetime:
    # Django stores UTC; a naive value (USE_TZ = False) is read as UTC, as beat reads it
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


# --- writing TOML -------------------------------------------------------------------------


def _header(where: str, *, tables: bool) -> list[str]:
    lines = [
        f"# cronlease.toml translated from {toml_comment(where)} "
        "by `cronlease import-celery-beat`.",
        "# Every replica running `cronlease run` with this file sends each entry once per tick.",
        '# database = "postgresql://user@host/db"   # or set CRONLEASE_DATABASE_URL; '
        "default sqlite:///cronlease.db",
    ]
    if tables:
        lines.append(
            "# recover = true, as [celery] gives its entries: a tick whose replica died before "
            "the broker's confirm is resent"
        )
    return lines


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else toml_string(name)


def _schedule_lines(schedule: Mapping[str, Any]) -> list[str]:
    if "every" in schedule:
        return [f"every = {_seconds(schedule['every'])}"]
    return [
        f"cron = {toml_string(schedule['cron'])}",
        f"timezone = {toml_string(schedule['timezone'])}",
    ]


def _table(entry: _Entry, app: str) -> list[str]:
    lines = [f"[tasks.{_key(entry.name)}]", *_schedule_lines(entry.schedule)]
    lines += [f"celery_task = {toml_string(entry.task)}", f"celery_app = {toml_string(app)}"]
    if entry.args:
        lines.append(f"args = {_value(list(entry.args), 'args')}")
    if entry.kwargs:
        lines.append(f"kwargs = {_value(dict(entry.kwargs), 'kwargs')}")
    if entry.options:
        lines.append(f"celery_options = {_value(dict(entry.options), 'options')}")
    lines.append("recover = true")
    return lines


def _summary(entry: _Entry) -> str:
    schedule = ", ".join(_schedule_lines(entry.schedule))
    text = f"{entry.name}: {schedule} -> sends {entry.task}"
    for key, value in (("args", entry.args), ("kwargs", entry.kwargs)):
        if value:
            text += f", {key} {value!r}"
    if entry.options:
        text += f", options {dict(entry.options)!r}"
    return text


def _seconds(value: float | timedelta) -> str:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def _value(value: Any, where: str) -> str:
    """``value`` as TOML; Untranslatable for what TOML cannot hold (None, objects)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(item, where) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise Untranslatable(f"{where}: key {key!r} is not a string; TOML keys are")
            pairs.append(f"{_key(key)} = {_value(item, where)}")
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    what = "null" if value is None else f"a {type(value).__name__}"
    raise Untranslatable(f"{where}: {what} ({value!r}) has no TOML form")
