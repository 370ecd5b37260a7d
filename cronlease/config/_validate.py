"""Check the parsed TOML, table by table and key by key, into a :class:`Config`.

Every problem is a :class:`~cronlease.errors.ConfigFileError` naming the task,
the key and (found by :mod:`cronlease.config._locate`) the line.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cronlease._call_args import call_shape
from cronlease._lease.database import DEFAULT_URL
from cronlease._lease.model import check_task_name
from cronlease._options import (
    OPTIONS,
    SCHEDULE_KEYS,
    OptionError,
    parse_options,
    schedule_of,
    type_name,
    unknown_key,
)
from cronlease._roles import parse_roles
from cronlease._send.celery_beat import CelerySender
from cronlease._send.sending import SendTask
from cronlease._task import RunContext
from cronlease._timing.schedule import parse_duration
from cronlease.config._calls import resolve_call, split_call
from cronlease.config._celery import celery_specs, import_app
from cronlease.config._database import DatabaseTable, beside
from cronlease.config._locate import SourceLines
from cronlease.config._spec import Config, JobSpec, TaskSpec
from cronlease.errors import ConfigError, ConfigFileError

__all__ = ["DATABASE_ENV", "Validator"]

#: overrides the file's ``database``
DATABASE_ENV = "CRONLEASE_DATABASE_URL"

TOP_LEVEL_KEYS = (
    "database",
    "namespace",
    "holder",
    "history_keep",
    "scheduler",
    "celery",
    "tasks",
    "jobs",
)
#: keys of the ``[scheduler]`` table: settings of the replica, not of a task
SCHEDULER_KEYS = ("shutdown_grace", "roles", "schedule_poll")
#: the keys of a task that are not options of the decorator: what to run (the decorated
#: function is its own ``call``) and how a command is run; the rest is :data:`OPTIONS`
CALL_KEYS = ("call",)
COMMAND_KEYS = ("command", "shell", "cwd", "env")
#: a task whose run sends a Celery task by name through an app (a beat entry written out
#: as a table: ``cronlease import-celery-beat``); ``args``/``kwargs`` are the message's
SEND_KEYS = ("celery_task", "celery_app", "celery_options")
#: options that apply to a ``call`` only (a command takes its arguments in its line)
CALL_OPTIONS = tuple(key for key, option in OPTIONS.items() if option.call_only)
TASK_KEYS = (*CALL_KEYS, *COMMAND_KEYS, *SEND_KEYS, *OPTIONS)
#: the keys of a ``[jobs.NAME]`` table: what runs, and how a command runs; a job has no
#: schedule or options of its own (the schedule rows that run it have them)
JOB_KEYS = (*CALL_KEYS, *COMMAND_KEYS)
#: keys of the ``[celery]`` table: the app, and task options for every beat entry (not
#: the schedule, which is each entry's, nor a call's arguments, which are the entry's)
CELERY_KEYS = (
    "app",
    *(key for key, option in OPTIONS.items() if key not in SCHEDULE_KEYS and not option.call_only),
)


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
        return self.error(unknown_key(key, allowed), task=task, key=key)

    def string(self, value: object, task: str | None, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {type_name(value)}", task=task, key=key)
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
        shutdown_grace, roles = self.scheduler_settings(data.get("scheduler", {}))
        schedule_poll = self.schedule_poll(data.get("scheduler", {}))
        tasks_table = data.get("tasks", {})
        if not isinstance(tasks_table, dict):
            raise self.error(
                f"must be a table of [tasks.NAME] tables, not {type_name(tasks_table)}",
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
        jobs = self.jobs(data.get("jobs", {}))
        celery_app, celery_options = self.celery_table(data.get("celery", {}))
        if celery_app is not None and self.import_calls:
            for spec in self.celery_tasks(celery_app, celery_options):
                if spec.name in tasks:
                    raise self.celery_error(
                        f"beat entry {spec.name!r} has the name of a [tasks] table",
                        "app",
                        task=spec.name,
                    )
                tasks[spec.name] = spec
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
            schedule_poll=schedule_poll,
            roles=roles,
            tasks=tasks,
            jobs=jobs,
            celery_app=celery_app,
            celery_options=celery_options,
        )

    def job_error(self, message: str, job: str, key: str | None = None) -> ConfigFileError:
        line = self.source.table_key_line(f"jobs.{job}", key or "call")
        return ConfigFileError(self.path, message, job=job, key=key, line=line)

    def jobs(self, table: object) -> dict[str, JobSpec]:
        """``[jobs.NAME]`` tables: a ``call`` or a ``command`` (with ``shell``, ``cwd``,
        ``env``), checked as a task's are."""
        if not isinstance(table, dict):
            raise self.error(
                f"must be a table of [jobs.NAME] tables, not {type_name(table)}", key="jobs"
            )
        found: dict[str, JobSpec] = {}
        for name, job in table.items():
            try:
                stored = check_task_name(name)
            except ConfigError as exc:
                raise self.job_error(f"invalid job name: {exc}", name) from None
            if not isinstance(job, dict):
                raise self.job_error(f"must be a table ([jobs.{name}]), not {type_name(job)}", name)
            for key in job:
                if key not in JOB_KEYS:
                    hint = (
                        "; a job's schedule and options are its schedule rows'"
                        if key in OPTIONS
                        else ""
                    )
                    raise self.job_error(unknown_key(key, JOB_KEYS) + hint, name, key)
            kinds = [key for key in ("call", "command") if key in job]
            if len(kinds) != 1:
                raise self.job_error(
                    "give exactly one of 'call' (a Python callable) or 'command'",
                    name,
                    kinds[-1] if kinds else None,
                )
            line = self.source.table_key_line(f"jobs.{name}", kinds[0])
            if kinds[0] == "command":

                def error(message: str, key: str | None, _name: str = name) -> ConfigFileError:
                    return self.job_error(message, _name, key)

                command, shell, cwd, env = self.command_parts(job, name, error)
                found[stored] = JobSpec(
                    stored, command=command, shell=shell, cwd=cwd, env=env, line=line
                )
                continue
            for key in ("shell", "cwd", "env"):
                if key in job:
                    raise self.job_error("applies to command jobs only", name, key)
            target = job["call"]
            if not isinstance(target, str):
                raise self.job_error(f"must be a string, not {type_name(target)}", name, "call")
            try:
                split_call(target)
                func = resolve_call(target, self.path.parent) if self.import_calls else None
            except ConfigError as exc:
                raise self.job_error(str(exc), name, "call") from None
            found[stored] = JobSpec(stored, call=target, func=func, line=line)
        return found

    def celery_error(self, message: str, key: str, task: str | None = None) -> ConfigFileError:
        return ConfigFileError(
            self.path,
            message,
            task=task,
            key=f"celery.{key}",
            line=self.source.table_key_line("celery", key),
        )

    def celery_table(self, table: object) -> tuple[str | None, dict[str, Any]]:
        """``[celery]``: ``app = "proj.celery:app"`` and the entries' task options."""
        if not isinstance(table, dict):
            raise self.error(f"must be a table, not {type_name(table)}", key="celery")
        for key in table:
            if key not in CELERY_KEYS:
                raise self.celery_error(unknown_key(key, CELERY_KEYS), key)
        options = {key: value for key, value in table.items() if key != "app"}
        try:
            parse_options(options)
        except OptionError as exc:
            raise self.celery_error(exc.detail, exc.key or "app") from None
        if "app" not in table:
            if options:
                raise self.celery_error('give the app: app = "proj.celery:app"', "app")
            return None, {}
        app = table["app"]
        if not isinstance(app, str):
            raise self.celery_error(f"must be a string, not {type_name(app)}", "app")
        try:
            split_call(app)
        except ConfigError as exc:
            raise self.celery_error(str(exc), "app") from None
        return app, options

    def celery_tasks(self, app: str, options: dict[str, Any]) -> list[TaskSpec]:
        try:
            return celery_specs(
                app,
                options,
                base=self.path.parent,
                line=self.source.table_key_line("celery", "app"),
            )
        except ConfigError as exc:
            raise self.celery_error(str(exc), "app") from None

    def schedule_poll(self, table: dict[str, Any]) -> float | None:
        """``[scheduler] schedule_poll``: how often the replica reads the schedule rows."""
        if "schedule_poll" not in table:
            return None
        value = table["schedule_poll"]
        try:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ConfigError(f'must be a duration such as 5 or "5s", not {type_name(value)}')
            seconds = parse_duration(value, what="schedule_poll").total_seconds()
        except ConfigError as exc:
            raise self.error(str(exc), key="schedule_poll") from None
        if not 0.05 <= seconds <= 3600:
            raise self.error("must be from 0.05 s to 1 hour", key="schedule_poll")
        return seconds

    def scheduler_settings(self, table: object) -> tuple[float | None, tuple[str, ...]]:
        """The ``[scheduler]`` table: ``shutdown_grace`` (None: the default) and ``roles``."""
        if not isinstance(table, dict):
            raise self.error(f"must be a table, not {type_name(table)}", key="scheduler")
        for key in table:
            if key not in SCHEDULER_KEYS:
                raise self.unknown_key(key, SCHEDULER_KEYS, None)
        try:
            roles = parse_roles(table.get("roles", ()))
        except ConfigError as exc:
            raise self.error(str(exc), key="roles") from None
        if "shutdown_grace" not in table:
            return None, roles
        value = table["shutdown_grace"]
        try:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ConfigError(
                    f'must be a duration such as 20, "20s" or "1m", not {type_name(value)}'
                )
            return parse_duration(value, what="shutdown_grace").total_seconds(), roles
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
            raise self.error(f"must be a table ([tasks.{name}]), not {type_name(table)}", task=name)
        for key in table:
            if key in ("name", "namespace"):  # the decorator's name=, the scheduler's namespace
                where = "its table's, [tasks.NAME]" if key == "name" else "the file's, at the top"
                raise self.error(f"a task's {key} is {where}", task=name, key=key)
            if key not in TASK_KEYS:
                raise self.unknown_key(key, TASK_KEYS, name)

        # what to run
        kinds = [key for key in ("call", "command", "celery_task") if key in table]
        if len(kinds) != 1:
            raise self.error(
                "give exactly one of 'call' (a Python callable), 'command' or 'celery_task' "
                "(a Celery task to send)" + (f" (it has {' and '.join(kinds)})" if kinds else ""),
                task=name,
                key=kinds[-1] if kinds else None,
            )
        kind = kinds[0]
        owners = {key: "command" for key in COMMAND_KEYS}
        owners.update({key: "celery_task" for key in SEND_KEYS})
        owners.update({key: "call and celery_task" for key in CALL_OPTIONS})
        for key, owner in owners.items():
            if key in table and kind not in owner.split(" and "):
                raise self.error(f"applies to {owner} tasks only", task=name, key=key)

        given = {key: value for key, value in table.items() if key in OPTIONS}
        try:
            values = parse_options(given)
            schedule = schedule_of(values)
        except OptionError as exc:
            raise self.error(exc.detail, task=name, key=exc.key) from None
        common = {key: value for key, value in values.items() if key not in SCHEDULE_KEYS}
        common.update(
            name=stored,
            schedule=schedule,
            line=self.source.table_start(name) or self.source.dotted_line(name, None),
        )
        if kind == "call":
            return self.call_spec(table, common)
        if kind == "celery_task":
            return self.send_spec(table, common)
        return self.command_spec(table, common)

    def send_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        """A Celery task sent by name through ``celery_app``, as a beat entry is: the run is
        the broker's confirm (:mod:`cronlease._send.sending`)."""
        name = common["name"]
        task = self.string(table["celery_task"], name, "celery_task")
        if not task.strip():
            raise self.error("must be a Celery task name", task=name, key="celery_task")
        if "celery_app" not in table:
            raise self.error(
                'give the app that sends it: celery_app = "proj.celery:app"',
                task=name,
                key="celery_task",
            )
        target = self.string(table["celery_app"], name, "celery_app")
        try:
            split_call(target)
        except ConfigError as exc:
            raise self.error(str(exc), task=name, key="celery_app") from None
        options = table.get("celery_options", {})
        if not isinstance(options, dict):
            raise self.error(
                f"must be a table, not {type_name(options)}", task=name, key="celery_options"
            )
        # the message's arguments, not the body's: the body is the sender's
        args, kwargs = common.pop("args"), common.pop("kwargs")
        sender = None
        if self.import_calls:
            try:
                app = import_app(target, self.path.parent)
            except ConfigError as exc:
                raise self.error(str(exc), task=name, key="celery_app") from None
            try:
                sender = SendTask(name, CelerySender(app, task, args, kwargs, options))
            except ConfigError as exc:
                raise self.error(str(exc), task=name, key="celery_options") from None
        return TaskSpec(sender=sender, sends=f"{task} via Celery app {target}", **common)

    def call_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        name = common["name"]
        target = self.string(table["call"], name, "call")
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
            try:  # as the scheduler will call it: caught by `check`, not at the first run
                call_shape(func, common["args"], common["kwargs"], RunContext)
            except OptionError as exc:
                raise self.error(exc.detail, task=name, key=exc.key) from None
        return TaskSpec(call=target, func=func, **common)

    def command_spec(self, table: dict[str, Any], common: dict[str, Any]) -> TaskSpec:
        name = common["name"]

        def error(message: str, key: str | None) -> ConfigFileError:
            return self.error(message, task=name, key=key)

        command, shell, cwd, env = self.command_parts(table, name, error)
        return TaskSpec(command=command, shell=shell, cwd=cwd, env=env, **common)

    def command_parts(
        self,
        table: dict[str, Any],
        name: str,
        error: Callable[[str, str | None], ConfigFileError],
    ) -> tuple[str | tuple[str, ...], bool, str | None, dict[str, str]]:
        """A command task's or job's ``command``, ``shell``, ``cwd`` and ``env``."""
        shell = table.get("shell", False)
        if not isinstance(shell, bool):
            raise error(f"must be true or false, not {type_name(shell)}", "shell")
        raw = table["command"]
        command: str | tuple[str, ...]
        if isinstance(raw, str):
            if not raw.strip():
                raise error("must not be empty", "command")
            if shell:
                command = raw
            else:
                try:
                    command = tuple(shlex.split(raw))
                except ValueError as exc:
                    raise error(
                        f"cannot be split into words ({exc}); fix the quoting or set shell = true",
                        "command",
                    ) from None
        elif isinstance(raw, list):
            if not raw or not all(isinstance(word, str) for word in raw) or not raw[0]:
                raise error("must be a string or a non-empty array of strings", "command")
            if shell:
                raise error("with shell = true, give the command as one string", "command")
            command = tuple(raw)
        else:
            raise error(f"must be a string or an array of strings, not {type_name(raw)}", "command")
        cwd = None
        if "cwd" in table:
            cwd_text = table["cwd"]
            if not isinstance(cwd_text, str):
                raise error(f"must be a string, not {type_name(cwd_text)}", "cwd")
            cwd = str((self.path.parent / Path(cwd_text).expanduser()).resolve())
            if not Path(cwd).is_dir():
                raise error(f"{cwd_text!r} is not a directory", "cwd")
        env = table.get("env", {})
        if not isinstance(env, dict):
            raise error(f"must be a table, not {type_name(env)}", "env")
        for var, value in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise error(f"{var!r} is not a valid environment variable name", "env")
            if not isinstance(value, str):
                raise error(f"the value of {var} must be a string, not {type_name(value)}", "env")
        return command, shell, cwd, dict(env)
