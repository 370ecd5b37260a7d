"""``cronlease schedule add|set|rm|ls|show|history``: schedules kept in the database.

Every subcommand goes through :class:`cronlease.Schedules`, the one model every
surface uses (docs/design.md §5.37): this module turns arguments into its calls and
formats what it returns. The model checks a write as a replica will load the row;
its refusals are ConfigErrors (exit 2, one line naming the schedule and the key,
nothing written), as a stale ``--version`` is (naming the newer version and who
made it); an unknown schedule is exit 2 too, as an unknown task is everywhere.

The database and namespace are the other commands' (``--database``, the config
file, ``CRONLEASE_DATABASE_URL``); the database is asked whether it can be opened
before any statement, so an outage reads as the other commands' one line, exit 1.
The reads (``ls``, ``show``, ``history``) create no tables. Under Django
(``manage.py cronlease schedule``) the model is the settings' scheduler's
(``scheduler.schedules``): rows are checked against the jobs the project's code
registers and refused a name its tasks use.

The task options a schedule takes are the ones a row keeps
(:data:`cronlease._schedules.rows.ROW_OPTIONS`, from the option table of
:mod:`cronlease._options`): one ``--OPTION VALUE`` each, the value read as a TOML
value, as ``cronlease.toml`` gives it (``--retries 3``, ``--grace 90s``,
``--recover true``, ``--roles '["reports"]'``); a value that is not TOML is a string.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime, time
from typing import Any

from cronlease._options import OPTIONS
from cronlease._schedules.model import ScheduleChange, Schedules, StoredSchedule
from cronlease._schedules.rows import ROW_OPTIONS
from cronlease._service import (
    UsageError,
    command_line,
    no_tables,
    open_store,
    require_tables,
    tables_exist,
)
from cronlease._status import format_time
from cronlease._status.cells import short_time
from cronlease.cli.common import EXIT_OK, Preset, config_from_args, database_url
from cronlease.cli.output import print_json, print_table
from cronlease.errors import ConfigError, UnknownScheduleError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "OPTION_FLAGS",
    "SUBCOMMANDS",
    "UNSETTABLE",
    "cmd_schedule_add",
    "cmd_schedule_history",
    "cmd_schedule_ls",
    "cmd_schedule_rm",
    "cmd_schedule_set",
    "cmd_schedule_show",
    "option_help",
    "toml_value",
    "unset_key",
]

#: the subcommands, in the order ``cronlease schedule --help`` lists them
SUBCOMMANDS = ("add", "set", "rm", "ls", "show", "history")
#: each task option a schedule row keeps, and its flag (``lease_ttl``: ``--lease-ttl``)
OPTION_FLAGS: dict[str, str] = {key: "--" + key.replace("_", "-") for key in ROW_OPTIONS}
#: what ``set --unset KEY`` takes back to its default: the options, and a cron's zone
UNSETTABLE = (*ROW_OPTIONS, "timezone")


# --- arguments ------------------------------------------------------------------------


def toml_value(text: str) -> Any:
    """``text`` read as the value of a TOML key, as ``cronlease.toml`` gives an option:
    ``30`` an integer, ``true`` a boolean, ``["a"]`` an array, ``2026-01-01T00:00:00Z``
    a date-time; anything else (``90s``, ``latest``) the string itself. A TOML date or
    time without a date-time is its text (the model says what it lacks)."""
    try:
        parsed = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        return text
    if set(parsed) != {"value"}:  # a newline in the text made more keys: a string
        return text
    value = parsed["value"]
    if isinstance(value, (date, time)) and not isinstance(value, datetime):
        return value.isoformat()
    return value


def unset_key(text: str) -> str:
    """``--unset KEY``: an option (spelt as in cronlease.toml or as its flag) or timezone."""
    key = text.removeprefix("--").replace("-", "_")
    if key not in UNSETTABLE:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an option a schedule keeps; one of: {', '.join(UNSETTABLE)}"
        )
    return key


def option_help(key: str) -> str:
    """The flag's help: the option table's meaning, its Markdown made plain text."""
    declared = OPTIONS[key]
    default = declared.shown or ("none" if declared.default is None else _shown(declared.default))
    text = f"{key} as in cronlease.toml (default {default}): {declared.meaning}"
    return re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text).replace("`", "").replace("%", "%%")


def _json_argument(name: str, key: str, text: str | None, kind: type) -> Any:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"schedule {name!r}, key {key!r}: not JSON ({exc})") from None
    if not isinstance(value, kind):
        what = "array, such as [1, 2]" if kind is list else 'object, such as {"a": 1}'
        raise ConfigError(f"schedule {name!r}, key {key!r}: must be a JSON {what}, not {text}")
    return value


def _given_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        key: toml_value(text)
        for key in ROW_OPTIONS
        if (text := getattr(args, f"option_{key}", None)) is not None
    }


def _schedule_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The schedule's fields the arguments give (absent ones left out)."""
    given: dict[str, Any] = {}
    if args.job is not None:
        given["job"] = args.job
    if args.every is not None:
        given["every"] = toml_value(args.every)
    if args.cron is not None:
        given["cron"] = args.cron
    if args.timezone is not None:
        given["timezone"] = args.timezone
    positional = _json_argument(args.name, "args", args.call_args, list)
    if positional is not None:
        given["args"] = positional
    keywords = _json_argument(args.name, "kwargs", args.call_kwargs, dict)
    if keywords is not None:
        given["kwargs"] = keywords
    if args.enabled is not None:
        given["enabled"] = args.enabled
    return given


# --- the model ------------------------------------------------------------------------


@contextmanager
def _model(args: argparse.Namespace, *, write: bool) -> Iterator[Schedules | None]:
    """The model on the command's database and namespace; None for a read of a database
    without the cronlease tables (nothing is created by a read). Failure (exit 1) when
    the database cannot be opened, before any statement."""
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    preset: Preset | None = getattr(args, "preset", None)
    if preset is not None and preset.scheduler is not None:
        # the host's scheduler: its code's jobs and tasks check the rows
        scheduler = preset.scheduler
        if write:
            require_tables(scheduler.store, url)
        elif not tables_exist(scheduler.store, url):
            yield None
            return
        yield scheduler.schedules
        return
    code_tasks = list(config.tasks) if config else []
    with open_store(url, config, read_only=not write) as store:
        if write:
            require_tables(store, url)
        elif not tables_exist(store, url):
            yield None
            return
        yield Schedules(
            store=store,
            namespace=config.namespace if config else None,
            code_tasks=lambda: code_tasks,
        )


def _no_tables_note(args: argparse.Namespace) -> str:
    config = config_from_args(args, required=False, import_calls=False)
    return no_tables(database_url(args, config))


@contextmanager
def _known(name: str) -> Iterator[None]:
    """An unknown schedule is a usage error (exit 2), as an unknown task is."""
    try:
        yield
    except UnknownScheduleError as exc:
        raise UsageError(
            f"{exc}; the schedules: {command_line('schedule ls')}"
            if str(exc)
            else f"no schedule named {name!r}"
        ) from None


# --- writing --------------------------------------------------------------------------


def cmd_schedule_add(args: argparse.Namespace) -> int:
    fields = _schedule_fields(args)
    if "job" not in fields:
        raise UsageError("schedule add: give --job JOB")
    options = _given_options(args)
    with _model(args, write=True) as model:
        assert model is not None
        job = fields.pop("job")
        added = model.add(args.name, job=job, changed_by=args.changed_by, **fields, **options)
        offered = model.jobs()
    _written(args, "added", added, offered)
    return EXIT_OK


def cmd_schedule_set(args: argparse.Namespace) -> int:
    changes = {**_schedule_fields(args), **_given_options(args)}
    for key in args.unset or ():
        if key in changes:
            raise UsageError(f"schedule set: --unset {key} and a new value for it, not both")
        changes[key] = None
    if not changes:
        raise UsageError(
            "schedule set: nothing to change: give the fields to change (--every, --cron, "
            "--job, --args, an option, --enable or --disable, --unset KEY)"
        )
    with _model(args, write=True) as model, _known(args.name):
        assert model is not None
        changed = model.update(
            args.name,
            expected_version=args.expected_version,
            changed_by=args.changed_by,
            **changes,
        )
        offered = model.jobs()
    _written(args, "changed", changed, offered)
    return EXIT_OK


def cmd_schedule_rm(args: argparse.Namespace) -> int:
    with _model(args, write=True) as model, _known(args.name):
        assert model is not None
        model.remove(args.name, expected_version=args.expected_version, changed_by=args.changed_by)
        removal = model.history(args.name)[-1]
    if args.json:
        print_json({"name": args.name, "removed": True, "version": removal.version})
    else:
        print(
            f"removed schedule {args.name!r} (version {removal.version}): replicas stop "
            f"firing it within a poll; its history stays "
            f"({command_line(f'schedule history {args.name}')})"
        )
    return EXIT_OK


def _written(
    args: argparse.Namespace,
    verb: str,
    schedule: StoredSchedule,
    offered: Mapping[str, Sequence[str]],
) -> None:
    if args.json:
        print_json(schedule_json(schedule, offered))
        return
    print(
        f"{verb} schedule {schedule.name!r}: version {schedule.version}, job {schedule.job}, "
        f"{schedule_text(schedule)}{'' if schedule.enabled else ', disabled'}"
    )
    if not offered:
        print(
            "cronlease: note: no live replica offers any job here: the job and its "
            "arguments are checked when a replica loads the schedule",
            file=sys.stderr,
        )
    elif not offered.get(schedule.job):
        print(
            f"cronlease: note: no live replica offers job {schedule.job!r} yet: the "
            "schedule runs once one does",
            file=sys.stderr,
        )


# --- reading --------------------------------------------------------------------------


def cmd_schedule_ls(args: argparse.Namespace) -> int:
    with _model(args, write=False) as model:
        if model is None:
            found: list[StoredSchedule] = []
            offered: dict[str, list[str]] = {}
        else:
            found = model.list()
            offered = model.jobs()
    if args.json:
        print_json([schedule_json(schedule, offered) for schedule in found])
        return EXIT_OK
    if model is None:
        print(_no_tables_note(args))
    if not found:
        print("(no schedules)")
        return EXIT_OK
    headers = [
        "NAME",
        "JOB",
        "SCHEDULE",
        "ENABLED",
        "VERSION",
        "CHANGED BY",
        "CHANGED AT",
        "REPLICAS",
        "STATE",
    ]
    rows = [
        [
            s.name,
            s.job,
            schedule_text(s),
            "yes" if s.enabled else "no",
            str(s.version),
            s.changed_by,
            short_time(s.changed_at),
            str(len(offered.get(s.job, ()))),
            state_text(s, offered.get(s.job, ())),
        ]
        for s in found
    ]
    print_table(headers, rows)
    return EXIT_OK


def cmd_schedule_show(args: argparse.Namespace) -> int:
    with _model(args, write=False) as model, _known(args.name):
        if model is None:
            raise UnknownScheduleError(f"no schedule named {args.name!r}")
        schedule = model.get(args.name)
        offered = model.jobs()
    if args.json:
        print_json(schedule_json(schedule, offered))
        return EXIT_OK
    holders = offered.get(schedule.job, [])
    options = ", ".join(f"{key} = {_shown(value)}" for key, value in schedule.options.items())
    lines = [
        ("name", schedule.name),
        ("job", schedule.job),
        ("schedule", schedule_text(schedule)),
        ("args", _shown(list(schedule.args))),
        ("kwargs", _shown(dict(schedule.kwargs))),
        ("options", options or "(defaults)"),
        ("enabled", "yes" if schedule.enabled else "no"),
        ("version", str(schedule.version)),
        ("changed by", schedule.changed_by),
        ("changed at", format_time(schedule.changed_at)),
        ("offered by", ", ".join(holders) if holders else "no live replica"),
        ("state", state_text(schedule, holders)),
    ]
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label.ljust(width)}  {value}")
    return EXIT_OK


def cmd_schedule_history(args: argparse.Namespace) -> int:
    with _model(args, write=False) as model:
        changes = [] if model is None else model.history(args.name)
    if not changes:
        where = "" if model is not None else f" ({_no_tables_note(args)})"
        raise UsageError(f"no schedule named {args.name!r} has a recorded change{where}")
    if args.json:
        print_json([change_json(change) for change in changes])
        return EXIT_OK
    print_table(
        ["VERSION", "CHANGED AT", "CHANGED BY", "ACTION", "CHANGES"],
        [
            [
                str(change.version),
                short_time(change.changed_at),
                change.changed_by,
                change.action,
                "; ".join(
                    f"{key}: {_shown(old)} -> {_shown(new)}"
                    for key, (old, new) in change.changes.items()
                ),
            ]
            for change in changes
        ],
    )
    return EXIT_OK


# --- formats --------------------------------------------------------------------------


def state_text(schedule: StoredSchedule, holders: Sequence[str]) -> str:
    """``ok``, ``invalid: why`` (no replica can load the row) or ``not offered`` (no live
    replica offers its job: none is up, or none has the job yet)."""
    if schedule.invalid is not None:
        return f"invalid: {schedule.invalid}"
    if not holders:
        return f"not offered: no live replica offers job {schedule.job!r}"
    return "ok"


def schedule_text(schedule: StoredSchedule) -> str:
    """``every 5m``, or ``cron '0 3 * * *' (Europe/Paris)``."""
    if schedule.every is not None:
        return f"every {schedule.every}"
    zone = f" ({schedule.timezone})" if schedule.timezone else ""
    return f"cron {schedule.cron!r}{zone}"


def schedule_json(schedule: StoredSchedule, offered: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    return {
        "name": schedule.name,
        "namespace": schedule.namespace,
        "full_name": schedule.full_name,
        "job": schedule.job,
        "every": schedule.every,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "args": list(schedule.args),
        "kwargs": dict(schedule.kwargs),
        "options": dict(schedule.options),
        "enabled": schedule.enabled,
        "version": schedule.version,
        "changed_by": schedule.changed_by,
        "changed_at": format_time(schedule.changed_at),
        "offered_by": list(offered.get(schedule.job, [])),
        "valid": schedule.invalid is None,
        "invalid": schedule.invalid,
    }


def change_json(change: ScheduleChange) -> dict[str, Any]:
    return {
        "name": change.name,
        "version": change.version,
        "action": change.action,
        "changed_by": change.changed_by,
        "changed_at": format_time(change.changed_at),
        "changes": {key: {"old": old, "new": new} for key, (old, new) in change.changes.items()},
    }


def _shown(value: object) -> str:
    """A value as JSON writes it (``null`` for none), as the row keeps it."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
