"""A schedule row's values: encoded for the table, decoded from it, made a task.

One path for every reader and writer: :func:`declare` builds the
:class:`~cronlease._task.Task` a replica runs with :meth:`Task.declare`, from
the job's function (or a replica's description of it) and the row, so every
option rule of a code task applies to a row, by the same code
(:mod:`cronlease._options`); the model checks a row by declaring it before it
writes it, and a replica declares it again when it loads it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from cronlease._lease.schedule_rows import ScheduleRow
from cronlease._options import OPTIONS, SCHEDULE_KEYS, TaskOptions
from cronlease._shell_task import CommandTask
from cronlease._task import Task
from cronlease.errors import ConfigError

__all__ = [
    "COLUMNS",
    "ROW_OPTIONS",
    "Decoded",
    "declare",
    "decode",
    "encode",
    "short_name",
]

#: the options a row keeps in its ``options`` JSON: a task's, less those with a column
#: (the schedule, args, kwargs, enabled) and ``ping_url`` (its path is a secret, and the
#: table is readable by whoever may read schedules)
ROW_OPTIONS: tuple[str, ...] = (
    "anchor",
    *(
        f.name
        for f in fields(TaskOptions)
        if f.name not in ("args", "kwargs", "enabled", "ping_url")
    ),
)
#: what a schedule is, field by field, in the order changes are listed
COLUMNS = ("job", "every", "cron", "timezone", "args", "kwargs", "enabled", "options")


@dataclass(frozen=True)
class Decoded:
    """A row's values as Python values (what :func:`encode` stored)."""

    job: str
    every: str | None = None
    cron: str | None = None
    timezone: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)

    def column(self, key: str) -> Any:
        """The value of ``key`` as JSON shows it (for the change log)."""
        value = getattr(self, key)
        if key == "args":
            return list(value)
        if key in ("kwargs", "options"):
            return dict(value)
        return value


def short_name(full_name: str, namespace: str) -> str:
    return full_name[len(namespace) + 1 :] if namespace else full_name


def _every_text(every: object) -> str | None:
    """``every`` as stored: the text as given, else the seconds (``"90s"``)."""
    if every is None or isinstance(every, str):
        return every
    if isinstance(every, timedelta):
        return f"{every.total_seconds():g}s"
    if isinstance(every, (int, float)) and not isinstance(every, bool) and math.isfinite(every):
        return f"{every:g}s"
    raise ConfigError(f"key 'every': must be a duration such as 30 or \"90s\", not {every!r}")


def _json(key: str, value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"key {key!r}: must be JSON values (strings, numbers, ...): {exc}"
        ) from None


def normalized(
    *,
    job: str,
    every: object = None,
    cron: str | None = None,
    timezone: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    enabled: bool = True,
    options: Mapping[str, Any] | None = None,
) -> Decoded:
    """The values as a row keeps them: JSON round-tripped, so what is checked is what a
    replica will read back. ConfigError for a value JSON cannot hold or an unknown key."""
    if not isinstance(job, str) or not job:
        raise ConfigError(f"key 'job': must be a job's name, not {job!r}")
    given = dict(options or {})
    for key in given:
        if key not in ROW_OPTIONS:
            if key in OPTIONS:
                raise ConfigError(f"key {key!r}: not kept in a schedule row")
            raise ConfigError(f"key {key!r}: unknown option; known: {', '.join(ROW_OPTIONS)}")
    anchor = given.get("anchor")
    if isinstance(anchor, datetime):
        given["anchor"] = anchor.isoformat()
    if not isinstance(args, (list, tuple)):
        raise ConfigError(f"key 'args': must be a list of positional arguments, not {args!r}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError(f"key 'kwargs': must be a table of keyword arguments, not {kwargs!r}")
    if any(not isinstance(key, str) for key in kwargs or {}):
        raise ConfigError(f"key 'kwargs': its keys must be strings, not {list(kwargs or {})!r}")
    return Decoded(
        job=job,
        every=_every_text(every),
        cron=cron,
        timezone=timezone,
        args=tuple(json.loads(_json("args", list(args)))),
        kwargs=json.loads(_json("kwargs", dict(kwargs or {}))),
        enabled=enabled,
        options=json.loads(_json("options", given)),
    )


def encode(values: Decoded) -> dict[str, Any]:
    """The column values of a row (JSON text where the table keeps JSON)."""
    return {
        "job": values.job,
        "every": values.every,
        "cron": values.cron,
        "timezone": values.timezone,
        "args": _json("args", list(values.args)),
        "kwargs": _json("kwargs", dict(values.kwargs)),
        "options": _json("options", dict(values.options)),
        "enabled": values.enabled,
    }


def decode(row: ScheduleRow) -> Decoded:
    """A stored row's values; ConfigError saying what is wrong with one made by hand."""
    try:
        args = json.loads(row.args)
        kwargs = json.loads(row.kwargs)
        options = json.loads(row.options)
    except ValueError as exc:
        raise ConfigError(f"its JSON cannot be read: {exc}") from None
    if not isinstance(args, list):
        raise ConfigError("key 'args': must be a JSON array")
    if not isinstance(kwargs, dict):
        raise ConfigError("key 'kwargs': must be a JSON object")
    if not isinstance(options, dict):
        raise ConfigError("key 'options': must be a JSON object")
    return Decoded(
        job=row.job,
        every=row.every,
        cron=row.cron,
        timezone=row.timezone,
        args=tuple(args),
        kwargs=kwargs,
        enabled=row.enabled,
        options=options,
    )


def declare(
    name: str,
    namespace: str | None,
    values: Decoded,
    function: Callable[[str, float | None], Callable[..., Any]],
) -> Task:
    """The task a replica runs for a row: :meth:`Task.declare` of the job's function
    (``function(task name, timeout)``) and the row's values; ConfigError (one line,
    naming the key) when the row breaks a rule a code task would break."""
    options = dict(values.options)
    for key in options:
        if key not in ROW_OPTIONS:
            raise ConfigError(f"key {key!r}: not an option of a schedule row")
    anchor = options.get("anchor")
    if isinstance(anchor, str):
        try:
            options["anchor"] = datetime.fromisoformat(anchor.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"key 'anchor': {anchor!r} is not an ISO 8601 date-time") from None
    try:
        timeout = OPTIONS["timeout"].parse(options.get("timeout"))
    except ConfigError as exc:
        raise ConfigError(f"key 'timeout': {exc}") from None
    func = function(name, timeout)
    if isinstance(func, CommandTask):
        options["timeout"] = None  # a command enforces its own (it kills the process)
    schedule = {key: getattr(values, key) for key in SCHEDULE_KEYS if key != "anchor"}
    try:
        task = Task.declare(
            func,
            name=name,
            namespace=namespace or None,
            args=values.args,
            kwargs=values.kwargs,
            enabled=values.enabled,
            **schedule,
            **options,
        )
    except ConfigError as exc:
        # "task 'x', key 'k': ..." -> "key 'k': ...": the caller names the schedule
        text = str(exc)
        prefix = f"task {name!r}"
        raise ConfigError(text.removeprefix(prefix).lstrip(", :")) from None
    return task
