"""``cronlease.toml``: read a config file into validated task specs.

Everything is checked before anything starts or any database is touched.
A problem raises :class:`~cronlease.errors.ConfigFileError`, whose one-line message names the
file, the TOML line when it can be found, the task and the key::

    cronlease.toml:7: task 'backup', key 'every': every 'fivem' is not a duration ...

Layout::

    database = "postgresql://app@db/app"   # CRONLEASE_DATABASE_URL overrides
    namespace = "myapp"                    # optional: prefixes every task name
    holder = "web-1"                       # optional: this replica's holder id

    [tasks.purge-sessions]
    call = "myapp.jobs:purge_sessions"     # a Python callable ...
    every = "5m"

    [tasks.backup]
    command = "pg_dump -Fc app -f /backups/app.dump"   # ... or a command
    cron = "0 2 * * *"
    timezone = "Europe/Istanbul"
    timeout = "30m"
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import importlib
import inspect
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronlease._lease.database import DEFAULT_URL, normalize_url
from cronlease._lease.model import check_task_name
from cronlease._scheduler import Scheduler
from cronlease._shell_task import CommandTask
from cronlease._task import CATCH_UP_POLICIES, RunContext, Task, takes_context
from cronlease._timing.schedule import Schedule, parse_duration
from cronlease.errors import ConfigError, ConfigFileError, TaskTimeout

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "DATABASE_ENV",
    "DEFAULT_CONFIG",
    "Config",
    "TaskSpec",
    "load_config",
    "resolve_call",
]

DEFAULT_CONFIG = "cronlease.toml"
DATABASE_ENV = "CRONLEASE_DATABASE_URL"

TOP_LEVEL_KEYS = ("database", "namespace", "holder", "tasks")
COMMON_KEYS = (
    "every",
    "cron",
    "timezone",
    "lease_ttl",
    "timeout",
    "enabled",
    "catchup",
    "catchup_limit",
)
CALL_KEYS = ("call", "args", "kwargs")
COMMAND_KEYS = ("command", "shell", "cwd", "env")
TASK_KEYS = (*CALL_KEYS, *COMMAND_KEYS, *COMMON_KEYS)


@dataclass(frozen=True)
class TaskSpec:
    """One ``[tasks.NAME]`` table, validated. ``func`` is None until calls are imported."""

    name: str
    schedule: Schedule
    call: str | None = None
    func: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    command: str | tuple[str, ...] | None = None
    shell: bool = False
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    lease_ttl: float | None = None
    timeout: float | None = None
    enabled: bool = True
    catchup: str = "latest"
    catchup_limit: int = 10
    line: int | None = None

    @property
    def kind(self) -> str:
        return "call" if self.call is not None else "command"

    @property
    def target(self) -> str:
        """What the task runs, for people: the call path or the command line."""
        if self.call is not None:
            return self.call
        if isinstance(self.command, tuple):
            return shlex.join(self.command)
        return self.command or ""

    def function(self) -> Callable[..., Any]:
        """What the scheduler calls: a :class:`CommandTask`, or the imported callable."""
        if self.command is not None:
            return CommandTask(
                self.name,
                self.command,
                shell=self.shell,
                cwd=self.cwd,
                env=self.env,
                timeout=self.timeout,
            )
        if self.func is None:
            raise ConfigError(f"task {self.name!r}: its call {self.call!r} was not imported")
        return self.func if self.timeout is None else _with_timeout(self.func, self.timeout)

    def add_to(self, scheduler: Scheduler, *, catchup: str | None = None) -> Task:
        """Declare this task on ``scheduler`` (its namespace applies)."""
        options: dict[str, Any]
        if self.schedule.kind == "every":
            options = {"every": self.schedule.interval}
        else:
            options = {"cron": self.schedule.expression, "timezone": self.schedule.timezone}
        return scheduler.add_task(
            self.function(),
            name=self.name,
            lease_ttl=self.lease_ttl,
            catchup=catchup or self.catchup,
            catchup_limit=self.catchup_limit,
            args=self.args,
            kwargs=self.kwargs,
            **options,
        )


@dataclass(frozen=True)
class Config:
    """A whole config file, validated."""

    path: Path
    database: str
    database_source: str  # "file", "environment" or "default"
    namespace: str | None = None
    holder: str | None = None
    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)

    def full_name(self, name: str) -> str:
        return f"{self.namespace}:{name}" if self.namespace else name


def load_config(path: str | Path, *, import_calls: bool = True) -> Config:
    """Read, parse and validate ``path``; raise :class:`ConfigFileError` for any problem.

    With ``import_calls`` every ``call`` is imported (with the config file's
    directory on ``sys.path``) and must name a callable; without it, the
    paths are only checked for their form, so tools such as ``status`` work
    where the application cannot be imported.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigFileError(path, f"cannot read the config file: {reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(path, exc) from None
    return _Validator(path, text, import_calls).config(data)


def resolve_call(target: str, base: Path | None = None) -> Callable[..., Any]:
    """Import ``"pkg.module:function"`` (attributes may be dotted) and return the callable.

    ``base`` (the config file's directory) is put on ``sys.path`` first.
    Raises :class:`ConfigError`.
    """
    module_name, attribute = _split_call(target)
    if base is not None:
        folder = str(base.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the application's module may raise anything on import
        raise ConfigError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(obj):
        raise ConfigError(f"{target!r} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


_CALL_FORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _split_call(target: str) -> tuple[str, str]:
    if not _CALL_FORM.match(target) or ".." in target or target.endswith("."):
        raise ConfigError(f"{target!r} is not of the form 'package.module:function'")
    module_name, attribute = target.split(":", 1)
    return module_name, attribute


def _with_timeout(func: Callable[..., Any], timeout: float) -> Callable[..., Any]:
    """Wrap an ``async def`` task so it is cancelled at ``timeout`` and recorded timed_out."""
    wants_context = takes_context(func)

    @functools.wraps(func)
    async def run(ctx: RunContext, *args: Any, **kwargs: Any) -> None:
        call_args = (ctx, *args) if wants_context else args
        try:
            await asyncio.wait_for(func(*call_args, **kwargs), timeout)
        except asyncio.TimeoutError:
            raise TaskTimeout(f"cancelled after its timeout of {timeout:g} s") from None

    del run.__wrapped__  # inspect must see run's own signature (ctx first)
    return run


def _syntax_error(path: Path, exc: tomllib.TOMLDecodeError) -> ConfigFileError:
    message = str(exc)
    line = None
    where = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if where:
        line = int(where.group(1))
        message = message[: where.start()].rstrip()
    elif "(at end of document)" in message:
        message = message.replace("(at end of document)", "").rstrip() + " at the end of the file"
    twice = re.match(r"Cannot (?:declare|overwrite a value) \('tasks', '([^']*)'", message)
    if twice:
        return ConfigFileError(
            path, "this task name is declared twice", task=twice.group(1), line=line
        )
    return ConfigFileError(path, f"not valid TOML: {message}", line=line)


class _Validator:
    def __init__(self, path: Path, text: str, import_calls: bool) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.import_calls = import_calls

    # --- locating keys in the text -----------------------------------------

    def _table_start(self, task: str) -> int | None:
        quoted = "|".join(re.escape(form) for form in (task, f'"{task}"', f"'{task}'"))
        header = re.compile(rf"^\s*\[\s*tasks\s*\.\s*({quoted})\s*\]\s*(#.*)?$")
        for number, line in enumerate(self.lines, 1):
            if header.match(line):
                return number
        return None

    def line_of(self, task: str | None, key: str | None) -> int | None:
        """Best effort: the line of ``key`` in ``[tasks.task]`` (or the top level)."""
        if task is None:
            start, end = 0, self._first_table()
        else:
            found = self._table_start(task)
            if found is None:
                return self._dotted_line(task, key)
            start = found
            end = self._next_table(found)
            if key is None:
                return found
        if key is None:
            return None
        key_re = re.compile(rf"^\s*({re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
        for number in range(start + 1, end + 1):
            if key_re.match(self.lines[number - 1]):
                return number
        return start if task is not None else None

    def _dotted_line(self, task: str, key: str | None) -> int | None:
        # tasks.NAME.key = ... or tasks.NAME = { ... } at the top level
        name = re.escape(task)
        pattern = re.compile(rf"^\s*tasks\s*\.\s*(\"{name}\"|'{name}'|{name})\s*(\.|=)")
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line) and (key is None or key in line):
                return number
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line):
                return number
        # NAME = ... or NAME.key = ... inside a [tasks] table
        in_tasks = re.compile(rf"^\s*(\"{name}\"|'{name}'|{name})\s*(\.|=)")
        for number, line in enumerate(self.lines, 1):
            if re.match(r"^\s*\[\s*tasks\s*\]", line):
                for inner in range(number + 1, self._next_table(number) + 1):
                    if in_tasks.match(self.lines[inner - 1]):
                        return inner
        return None

    def _first_table(self) -> int:
        for number, line in enumerate(self.lines, 1):
            if line.lstrip().startswith("["):
                return number - 1
        return len(self.lines)

    def _next_table(self, start: int) -> int:
        for number in range(start + 1, len(self.lines) + 1):
            if self.lines[number - 1].lstrip().startswith("["):
                return number - 1
        return len(self.lines)

    def error(
        self, message: str, *, task: str | None = None, key: str | None = None
    ) -> ConfigFileError:
        return ConfigFileError(self.path, message, task=task, key=key, line=self.line_of(task, key))

    # --- values ------------------------------------------------------------

    def unknown_key(self, key: str, allowed: Sequence[str], task: str | None) -> ConfigFileError:
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
        return self.error(f"unknown key{hint}", task=task, key=key)

    def string(self, value: object, task: str | None, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {_toml_type(value)}", task=task, key=key)
        return value

    def config(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                raise self.unknown_key(key, TOP_LEVEL_KEYS, None)
        from_env = os.environ.get(DATABASE_ENV)
        in_file = self.string(data["database"], None, "database") if "database" in data else None
        if from_env:
            database, source = from_env, "environment"
        elif in_file is not None:
            database, source = in_file, "file"
        else:
            database, source = DEFAULT_URL, "default"
        if in_file is not None:
            try:
                normalize_url(in_file)
            except ConfigError as exc:
                raise self.error(str(exc), key="database") from None
        if source == "environment":
            try:
                normalize_url(database)
            except ConfigError as exc:
                raise ConfigFileError(self.path, f"{DATABASE_ENV}: {exc}") from None
        namespace = None
        if "namespace" in data:
            namespace = self.string(data["namespace"], None, "namespace")
            try:
                check_task_name(namespace)
            except ConfigError as exc:
                raise self.error(str(exc), key="namespace") from None
        holder = None
        if "holder" in data:
            holder = self.string(data["holder"], None, "holder")
            if not holder.strip() or len(holder) > 200:
                raise self.error("must have 1 to 200 characters", key="holder")
        tasks_table = data.get("tasks", {})
        if not isinstance(tasks_table, dict):
            raise self.error(
                f"must be a table of [tasks.NAME] tables, not {_toml_type(tasks_table)}",
                key="tasks",
            )
        tasks: dict[str, TaskSpec] = {}
        for name, table in tasks_table.items():
            spec = self.task(name, table, namespace)
            tasks[name] = spec
        return Config(
            path=self.path,
            database=database,
            database_source=source,
            namespace=namespace,
            holder=holder,
            tasks=tasks,
        )

    def task(self, name: str, table: object, namespace: str | None) -> TaskSpec:
        try:
            check_task_name(name)
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
        enabled = table.get("enabled", True)
        if not isinstance(enabled, bool):
            raise self.error(
                f"must be true or false, not {_toml_type(enabled)}", task=name, key="enabled"
            )
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
        common = {
            "name": name,
            "schedule": schedule,
            "lease_ttl": lease_ttl,
            "timeout": timeout,
            "enabled": enabled,
            "catchup": catchup,
            "catchup_limit": catchup_limit,
            "line": self._table_start(name) or self._dotted_line(name, None),
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
        name, timeout = common["name"], common["timeout"]
        target = self.string(table["call"], name, "call")
        args = table.get("args", [])
        if not isinstance(args, list):
            raise self.error(f"must be an array, not {_toml_type(args)}", task=name, key="args")
        kwargs = table.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise self.error(f"must be a table, not {_toml_type(kwargs)}", task=name, key="kwargs")
        try:
            _split_call(target)
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key="call") from None
        func = None
        if self.import_calls:
            try:
                func = resolve_call(target, self.path.parent)
            except ConfigError as exc:
                raise self.error(str(exc), task=name, key="call") from None
            if timeout is not None and not _is_async(func):
                raise self.error(
                    "timeout needs an 'async def' callable (a Python thread cannot be "
                    "stopped safely); make it async, or run it as a command",
                    task=name,
                    key="timeout",
                )
        return TaskSpec(call=target, func=func, args=tuple(args), kwargs=dict(kwargs), **common)

    def command_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        name = common["name"]
        shell = table.get("shell", False)
        if not isinstance(shell, bool):
            raise self.error(
                f"must be true or false, not {_toml_type(shell)}", task=name, key="shell"
            )
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


def _is_async(func: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004
    )


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
