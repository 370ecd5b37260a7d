"""``settings.CRONLEASE``, checked by the code that checks ``cronlease.toml``.

::

    CRONLEASE = {
        "DATABASE": "default",        # a DATABASES alias (default "default")
        "AUTOSTART": False,           # True: each serving process is a replica
        "NAMESPACE": "myapp",         # optional: prefixes every task name
        "ROLES": ["reports"],         # optional: this replica's roles (see Roles)
        "SCHEDULE_POLL": "5s",        # optional: how often schedule rows are read
        "TASKS": {
            "purge-sessions": {"call": "myapp.jobs:purge", "every": "5m"},
            "backup": {"command": "pg_dump ...", "cron": "0 2 * * *"},
        },
        "JOBS": {                     # optional: what schedule rows may run
            "export": {"call": "myapp.jobs:export"},
        },
    }

A task's table takes the keys of a ``[tasks.NAME]`` table, a job's those of
a ``[jobs.NAME]`` table and ``SCHEDULE_POLL`` the values of ``[scheduler]
schedule_poll``, validated by :class:`cronlease.config._validate.Validator`;
an error names the setting, the task or job and the key, as for a file
(``settings.CRONLEASE: task 'backup', key 'every': ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cronlease._options import type_name, unknown_key
from cronlease._roles import parse_roles
from cronlease._service import check_task_name
from cronlease.config import Config, TaskSpec
from cronlease.config._validate import Validator
from cronlease.contrib.django._database import WHERE, database_of
from cronlease.errors import ConfigError, ConfigFileError

__all__ = ["KEYS", "DjangoSettings", "read_settings"]

KEYS = ("DATABASE", "AUTOSTART", "NAMESPACE", "ROLES", "SCHEDULE_POLL", "TASKS", "JOBS")

T = TypeVar("T")


@dataclass(frozen=True)
class DjangoSettings:
    """``settings.CRONLEASE``, validated: the alias, the autostart choice and, as a
    :class:`Config` (what the CLI's commands read), the database and the tasks."""

    alias: str
    autostart: bool
    config: Config

    def __post_init__(self) -> None:
        if not self.alias:
            raise ConfigFileError(WHERE, "must name a DATABASES alias", key="DATABASE")


def read_settings(
    value: object, databases: Mapping[str, Any], *, import_calls: bool = True
) -> DjangoSettings:
    """Check ``settings.CRONLEASE`` (None: not set) against ``DATABASES``."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigFileError(WHERE, f"must be a dict, not {type_name(value)}")
    for key in value:
        if key not in KEYS:
            raise ConfigFileError(WHERE, unknown_key(str(key), KEYS), key=str(key))
    alias = value.get("DATABASE", "default")
    if not isinstance(alias, str):
        raise ConfigFileError(WHERE, f"must be a string, not {type_name(alias)}", key="DATABASE")
    autostart = value.get("AUTOSTART", False)
    if not isinstance(autostart, bool):
        raise ConfigFileError(
            WHERE, f"must be True or False, not {type_name(autostart)}", key="AUTOSTART"
        )
    namespace = value.get("NAMESPACE")
    if namespace is not None:
        try:
            namespace = check_task_name(namespace) if isinstance(namespace, str) else None
        except ConfigError as exc:
            raise ConfigFileError(WHERE, str(exc), key="NAMESPACE") from None
        if namespace is None:
            raise ConfigFileError(WHERE, "must be a string", key="NAMESPACE")
    try:
        roles = parse_roles(value.get("ROLES", ()))
    except ConfigError as exc:
        raise ConfigFileError(WHERE, str(exc), key="ROLES") from None
    url, connect_args = database_of(alias, databases)
    table = value.get("TASKS", {})
    if not isinstance(table, Mapping):
        raise ConfigFileError(
            WHERE, f"must be a dict of task name to dict, not {type_name(table)}", key="TASKS"
        )
    validator = Validator(Path(WHERE), "", import_calls)
    tasks: dict[str, TaskSpec] = {}
    for name, options in table.items():
        if not isinstance(name, str):
            raise ConfigFileError(WHERE, f"a task name must be a string, not {name!r}", key="TASKS")
        if isinstance(options, Mapping):
            options = dict(options)
        spec = validator.task(name, options, namespace)
        if spec.name in tasks:
            raise ConfigFileError(
                WHERE, "declared twice (in two Unicode forms of its name)", task=name
            )
        tasks[spec.name] = spec
    poll = value.get("SCHEDULE_POLL")
    schedule_poll = (
        None
        if poll is None
        else _setting("SCHEDULE_POLL", lambda: validator.schedule_poll({"schedule_poll": poll}))
    )
    jobs_table = value.get("JOBS", {})
    if isinstance(jobs_table, Mapping):
        jobs_table = {
            name: dict(job) if isinstance(job, Mapping) else job for name, job in jobs_table.items()
        }
    jobs = _setting("JOBS", lambda: validator.jobs(jobs_table))
    config = Config(
        path=Path(WHERE),
        database=url,
        database_source="django",
        connect_args=connect_args,
        namespace=namespace,
        tasks=tasks,
        jobs=jobs,
        schedule_poll=schedule_poll,
        roles=roles,
    )
    return DjangoSettings(alias=alias, autostart=autostart, config=config)


def _setting(key: str, read: Callable[[], T]) -> T:
    """``read()``, an error about the whole value naming the setting's key as Django
    spells it (``SCHEDULE_POLL``, not the file's ``schedule_poll``); an error inside a
    job names the job and its own key, as for a file."""
    try:
        return read()
    except ConfigFileError as exc:
        if exc.job is None and exc.key == key.lower():
            raise ConfigFileError(WHERE, exc.detail, key=key) from None
        raise
