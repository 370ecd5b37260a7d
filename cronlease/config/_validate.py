"""Check the parsed TOML, table by table and key by key, into a :class:`Config`.

Every problem is a :class:`~cronlease.errors.ConfigFileError` naming the task,
the key and (found by :mod:`cronlease.config._locate`) the line.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronlease._lease.database import DEFAULT_URL
from cronlease._lease.model import check_task_name
from cronlease._task import CATCH_UP_POLICIES, DEFAULT_RETRY_DELAY, MAX_ALERT_AFTER, MAX_RETRIES
from cronlease._timing.schedule import Schedule, parse_duration
from cronlease.config._calls import resolve_call, split_call
from cronlease.config._database import DatabaseTable, beside
from cronlease.config._locate import SourceLines
from cronlease.config._spec import Config, TaskSpec
from cronlease.errors import ConfigError, ConfigFileError

__all__ = ["DATABASE_ENV", "Validator"]

#: overrides the file's ``database``
DATABASE_ENV = "CRONLEASE_DATABASE_URL"

TOP_LEVEL_KEYS = ("database", "namespace", "holder", "history_keep", "scheduler", "tasks")
#: keys of the ``[scheduler]`` table: settings of the replica, not of a task
SCHEDULER_KEYS = ("shutdown_grace",)
COMMON_KEYS = (
    "every",
    "cron",
    "timezone",
    "lease_ttl",
    "timeout",
    "enabled",
    "catchup",
    "catchup_limit",
    "retries",
    "retry_delay",
    "recover",
    "alert_after",
)
CALL_KEYS = ("call", "args", "kwargs")
COMMAND_KEYS = ("command", "shell", "cwd", "env")
TASK_KEYS = (*CALL_KEYS, *COMMAND_KEYS, *COMMON_KEYS)


class Validator:
    """Validates one parsed file; ``import_calls`` as for :func:`~cronlease.config.load_config`."""

    def __init__(self, path: Path, text: str, import_calls: bool) -> None:
        self.path = path
        self.source = SourceLines(text)
        self.import_calls = import_calls

    def error(
        self, message: str, *, task: str | None = None, key: str | None = None
    ) -> ConfigFileError:
        return ConfigFileError(
            self.path, message, task=task, key=key, line=self.source.line_of(task, key)
        )

    # --- values ------------------------------------------------------------

    def unknown_key(self, key: str, allowed: Sequence[str], task: str | None) -> ConfigFileError:
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
        return self.error(f"unknown key{hint}", task=task, key=key)

    def whole_number(self, task: str, table: dict[str, Any], key: str, low: int, high: int) -> int:
        value = table.get(key, low)  # (the least is the default)
        if type(value) is not int or not low <= value <= high:
            raise self.error(f"must be a whole number from {low} to {high}", task=task, key=key)
        return value

    def boolean(self, task: str, table: dict[str, Any], key: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.error(f"must be true or false, not {_toml_type(value)}", task=task, key=key)
        return value

    def string(self, value: object, task: str | None, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {_toml_type(value)}", task=task, key=key)
        return value

    def config(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                raise self.unknown_key(key, TOP_LEVEL_KEYS, None)
        tables = DatabaseTable(self.path, self.source)
        in_file, pool, connect_args = tables.read(data.get("database", {}))
        from_env = os.environ.get(DATABASE_ENV)
        if from_env:
            database, source = from_env, "environment"
        elif in_file is not None:
            database, source = in_file, "file"
        else:
            database, source = DEFAULT_URL, "default"
        if in_file is not None:
            tables.check_url(in_file, key="url" if isinstance(data["database"], dict) else None)
        if source == "environment":
            tables.check_url(database, key=None, env=DATABASE_ENV)
        else:  # the file's (or its default): relative to the file, as call= is
            database = beside(database, self.path.parent)
        namespace = None
        if "namespace" in data:
            namespace = self.string(data["namespace"], None, "namespace")
            try:
                namespace = check_task_name(namespace)
            except ConfigError as exc:
                raise self.error(str(exc), key="namespace") from None
        holder = None
        if "holder" in data:
            holder = self.string(data["holder"], None, "holder")
            if not holder.strip() or len(holder) > 200:
                raise self.error("must have 1 to 200 characters", key="holder")
        history_keep = data.get("history_keep")
        if "history_keep" in data and (type(history_keep) is not int or history_keep < 1):
            raise self.error("must be a whole number of runs, at least 1", key="history_keep")
        shutdown_grace = self.scheduler_settings(data.get("scheduler", {}))
        tasks_table = data.get("tasks", {})
        if not isinstance(tasks_table, dict):
            raise self.error(
                f"must be a table of [tasks.NAME] tables, not {_toml_type(tasks_table)}",
                key="tasks",
            )
        tasks: dict[str, TaskSpec] = {}
        written: dict[str, str] = {}  # stored name -> the name as the file writes it
        for name, table in tasks_table.items():
            spec = self.task(name, table, namespace)
            if spec.name in tasks:
                # TOML keys differ, the stored names do not: one lease for two tasks
                raise self.error(
                    f"declared twice: {written[spec.name]!r} and {name!r} are the same name "
                    "in two Unicode forms (names are stored in normalization form C)",
                    task=name,
                )
            tasks[spec.name] = spec
            written[spec.name] = name
        return Config(
            path=self.path,
            database=database,
            database_source=source,
            pool=pool,
            connect_args=connect_args,
            namespace=namespace,
            holder=holder,
            history_keep=history_keep,
            shutdown_grace=shutdown_grace,
            tasks=tasks,
        )

    def scheduler_settings(self, table: object) -> float | None:
        """The ``[scheduler]`` table; returns ``shutdown_grace`` (None: the default)."""
        if not isinstance(table, dict):
            raise self.error(f"must be a table, not {_toml_type(table)}", key="scheduler")
        for key in table:
            if key not in SCHEDULER_KEYS:
                raise self.unknown_key(key, SCHEDULER_KEYS, None)
        if "shutdown_grace" not in table:
            return None
        value = table["shutdown_grace"]
        try:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ConfigError(
                    f'must be a duration such as 20, "20s" or "1m", not {_toml_type(value)}'
                )
            return parse_duration(value, what="shutdown_grace").total_seconds()
        except ConfigError as exc:
            raise self.error(str(exc), key="shutdown_grace") from None

    def task(self, name: str, table: object, namespace: str | None) -> TaskSpec:
        try:
            stored = check_task_name(name)
            if namespace:
                check_task_name(f"{namespace}:{name}")
        except ConfigError as exc:
            raise self.error(f"invalid task name: {exc}", task=name) from None
        if not isinstance(table, dict):
            raise self.error(
                f"must be a table ([tasks.{name}]), not {_toml_type(table)}", task=name
            )
        for key in table:
            if key not in TASK_KEYS:
                raise self.unknown_key(key, TASK_KEYS, name)

        # what to run
        if ("call" in table) == ("command" in table):
            raise self.error(
                "give exactly one of 'call' (a Python callable) or 'command'"
                + (" (it has both)" if "call" in table else ""),
                task=name,
                key="command" if "call" in table else None,
            )
        for key in COMMAND_KEYS if "call" in table else CALL_KEYS:
            if key in table:
                raise self.error(
                    f"applies to {'command' if key in COMMAND_KEYS else 'call'} tasks only",
                    task=name,
                    key=key,
                )

        schedule = self.schedule(name, table)
        lease_ttl = self.duration(name, table, "lease_ttl")
        if lease_ttl is not None and not 1.0 <= lease_ttl <= 86400.0:
            raise self.error("must be between 1 s and 1 day", task=name, key="lease_ttl")
        timeout = self.duration(name, table, "timeout")
        enabled = self.boolean(name, table, "enabled", True)
        catchup = table.get("catchup", "latest")
        if catchup not in CATCH_UP_POLICIES:
            raise self.error(
                f"must be one of {', '.join(map(repr, CATCH_UP_POLICIES))}, not {catchup!r}",
                task=name,
                key="catchup",
            )
        catchup_limit = table.get("catchup_limit", 10)
        if type(catchup_limit) is not int or not 1 <= catchup_limit <= 1000:
            raise self.error("must be an integer from 1 to 1000", task=name, key="catchup_limit")
        retries = self.whole_number(name, table, "retries", 0, MAX_RETRIES)
        retry_delay = self.duration(name, table, "retry_delay")
        if retry_delay is not None and retry_delay > 86400.0:
            raise self.error("must be at most 1 day", task=name, key="retry_delay")
        recover = self.boolean(name, table, "recover", False)
        alert_after = self.whole_number(name, table, "alert_after", 1, MAX_ALERT_AFTER)
        common = {
            "name": stored,
            "schedule": schedule,
            "lease_ttl": lease_ttl,
            "timeout": timeout,
            "enabled": enabled,
            "catchup": catchup,
            "catchup_limit": catchup_limit,
            "retries": retries,
            "retry_delay": DEFAULT_RETRY_DELAY if retry_delay is None else retry_delay,
            "recover": recover,
            "alert_after": alert_after,
            "line": self.source.table_start(name) or self.source.dotted_line(name, None),
        }
        if "call" in table:
            return self.call_spec(table, common)
        return self.command_spec(table, common)

    def schedule(self, name: str, table: dict[str, Any]) -> Schedule:
        if "every" in table and "cron" in table:
            raise self.error("give either 'every' or 'cron', not both", task=name, key="cron")
        if "every" not in table and "cron" not in table:
            raise self.error(
                "no schedule: give 'every' (e.g. every = \"5m\") or 'cron' "
                '(e.g. cron = "0 3 * * *")',
                task=name,
            )
        zone = None
        if "timezone" in table:
            zone = self.string(table["timezone"], name, "timezone")
            if "every" in table:
                raise self.error("applies to cron schedules only", task=name, key="timezone")
            if zone.upper() != "UTC":
                try:
                    ZoneInfo(zone)
                except (ZoneInfoNotFoundError, ValueError):
                    close = difflib.get_close_matches(zone, available_timezones(), n=1)
                    hint = (
                        f"did you mean {close[0]!r}?"
                        if close
                        else "use an IANA name such as 'Europe/Istanbul'"
                    )
                    raise self.error(
                        f"unknown time zone {zone!r}: {hint}",
                        task=name,
                        key="timezone",
                    ) from None
        try:
            if "every" in table:
                every = table["every"]
                if not isinstance(every, (str, int, float)) or isinstance(every, bool):
                    raise ConfigError(
                        f'must be a duration such as 30, "90s" or "1h30m", not {_toml_type(every)}'
                    )
                return Schedule.every(every)
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key="every") from None
        cron = self.string(table["cron"], name, "cron")
        try:
            return Schedule.cron(cron, timezone=zone)
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key="cron") from None

    def duration(self, name: str, table: dict[str, Any], key: str) -> float | None:
        if key not in table:
            return None
        value = table[key]
        try:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ConfigError(
                    f'must be a duration such as 30, "90s" or "1h30m", not {_toml_type(value)}'
                )
            return parse_duration(value, what=key).total_seconds()
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key=key) from None

    def call_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        name = common["name"]
        target = self.string(table["call"], name, "call")
        args = table.get("args", [])
        if not isinstance(args, list):
            raise self.error(f"must be an array, not {_toml_type(args)}", task=name, key="args")
        kwargs = table.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise self.error(f"must be a table, not {_toml_type(kwargs)}", task=name, key="kwargs")
        try:
            split_call(target)
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key="call") from None
        func = None
        if self.import_calls:
            try:
                func = resolve_call(target, self.path.parent)
            except ConfigError as exc:
                raise self.error(str(exc), task=name, key="call") from None
        return TaskSpec(call=target, func=func, args=tuple(args), kwargs=dict(kwargs), **common)

    def command_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        name = common["name"]
        shell = self.boolean(name, table, "shell", False)
        raw = table["command"]
        command: str | tuple[str, ...]
        if isinstance(raw, str):
            if not raw.strip():
                raise self.error("must not be empty", task=name, key="command")
            if shell:
                command = raw
            else:
                try:
                    command = tuple(shlex.split(raw))
                except ValueError as exc:
                    raise self.error(
                        f"cannot be split into words ({exc}); fix the quoting or set shell = true",
                        task=name,
                        key="command",
                    ) from None
        elif isinstance(raw, list):
            if not raw or not all(isinstance(word, str) for word in raw) or not raw[0]:
                raise self.error(
                    "must be a string or a non-empty array of strings", task=name, key="command"
                )
            if shell:
                raise self.error(
                    "with shell = true, give the command as one string", task=name, key="command"
                )
            command = tuple(raw)
        else:
            raise self.error(
                f"must be a string or an array of strings, not {_toml_type(raw)}",
                task=name,
                key="command",
            )
        cwd = None
        if "cwd" in table:
            cwd_text = self.string(table["cwd"], name, "cwd")
            cwd = str((self.path.parent / Path(cwd_text).expanduser()).resolve())
            if not Path(cwd).is_dir():
                raise self.error(f"{cwd_text!r} is not a directory", task=name, key="cwd")
        env = table.get("env", {})
        if not isinstance(env, dict):
            raise self.error(f"must be a table, not {_toml_type(env)}", task=name, key="env")
        for var, value in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise self.error(
                    f"{var!r} is not a valid environment variable name", task=name, key="env"
                )
            if not isinstance(value, str):
                raise self.error(
                    f"the value of {var} must be a string, not {_toml_type(value)}",
                    task=name,
                    key="env",
                )
        return TaskSpec(command=command, shell=shell, cwd=cwd, env=dict(env), **common)


def _toml_type(value: object) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "an array",
        dict: "a table",
    }
    for kind, label in names.items():
        if type(value) is kind:
            return label
    return f"a {type(value).__name__}"
