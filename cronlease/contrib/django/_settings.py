"""``settings.CRONLEASE``, checked by the code that checks ``cronlease.toml``.

::

    CRONLEASE = {
        "DATABASE": "default",        # a DATABASES alias (default "default")
        "AUTOSTART": False,           # True: each serving process is a replica
        "NAMESPACE": "myapp",         # optional: prefixes every task name
        "ROLES": ["reports"],         # optional: this replica's roles (see Roles)
        "TASKS": {
            "purge-sessions": {"call": "myapp.jobs:purge", "every": "5m"},
            "backup": {"command": "pg_dump ...", "cron": "0 2 * * *"},
        },
    }

A task's table takes the keys of a ``[tasks.NAME]`` table, validated by
:class:`cronlease.config._validate.Validator`; an error names the setting,
the task and the key, as for a file (``settings.CRONLEASE: task 'backup',
key 'every': ...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronlease._options import type_name, unknown_key
from cronlease._roles import parse_roles
from cronlease._service import check_task_name
from cronlease.config import Config, TaskSpec
from cronlease.config._validate import Validator
from cronlease.contrib.django._database import WHERE, database_of
from cronlease.errors import ConfigError, ConfigFileError

__all__ = ["KEYS", "DjangoSettings", "read_settings"]

KEYS = ("DATABASE", "AUTOSTART", "NAMESPACE", "ROLES", "TASKS")


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
    config = Config(
        path=Path(WHERE),
        database=url,
        database_source="django",
        connect_args=connect_args,
        namespace=namespace,
        tasks=tasks,
        roles=roles,
    )
    return DjangoSettings(alias=alias, autostart=autostart, config=config)
