"""``cronlease check``: validate the config file; list its tasks and their next fire times.

:func:`describe` builds the one model both outputs print: per task, its
schedule, lease TTL and next ``count`` fire times. A fire time is the UTC
instant the schedule returns, shown as the wall time of the task's zone: the
instant is converted (through UTC, so a datetime the evaluator built in that
zone is normalized too), never a wall time stamped with an offset, so every
time shown exists in the zone, with the offset it has there.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any

from cronlease._service import command_line, config_warnings, probe_database, redact
from cronlease._status import format_duration, format_time, zone_of
from cronlease._timing.schedule import slot_of
from cronlease.cli.common import EXIT_FAILURE, EXIT_OK, config_from_args, database_url
from cronlease.cli.output import print_json
from cronlease.config import Config, TaskSpec

__all__ = ["DEFAULT_COUNT", "MAX_COUNT", "cmd_check", "describe"]

DEFAULT_COUNT = 3
#: enough to see a year of a daily task; more is a typo, not a question
MAX_COUNT = 1000


def cmd_check(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=True, import_calls=True)
    assert config is not None
    url = database_url(args, config)
    model = describe(config, datetime.now(timezone.utc), args.count)
    database: dict[str, Any] = {
        "connected": False,
        "reachable": None,
        "tables": None,
        "error": None,
    }
    if args.connect:
        database = {"connected": True, **probe_database(url, config)}
    code = EXIT_OK if database["reachable"] is not False else EXIT_FAILURE
    if args.json:
        print_json(
            {"config": str(config.path), "database": redact(url), **model, "connection": database}
        )
        return code
    tasks, warnings = model["tasks"], model["warnings"]
    print(
        f"{config.path}: OK, {len(tasks)} task(s) on {redact(url)}"
        + (f", namespace {config.namespace!r}" if config.namespace else "")
        + (f", {len(warnings)} warning(s)" if warnings else "")
    )
    for task in tasks:
        extras = [f"ttl {format_duration(task['lease_ttl'])}"]
        if task["timeout"] is not None:
            extras.append(f"timeout {format_duration(task['timeout'])}")
        if task["retries"]:
            extras.append(
                f"retries {task['retries']} after {format_duration(task['retry_delay'])} doubling"
            )
        if task["recover"]:
            extras.append("recover")
        if not task["enabled"]:
            extras.append("DISABLED")
        print()
        print(f"{task['name']}  {task['schedule']}  {', '.join(extras)}")
        print(f"  {task['kind']}: {task['target']}")
        for fire in task["fires"]:
            print(f"  next: {fire['local']}")
    print()
    print(_database_line(database))
    for warning in warnings:
        print(
            f"cronlease: warning: {warning['file']}: task {warning['task']!r}, "
            f"{warning['key']}: {warning['message']} (a warning: the config is valid, check "
            "exits 0 for it)",
            file=sys.stderr,
        )
    return code


def _database_line(database: dict[str, Any]) -> str:
    if not database["connected"]:
        return (
            "database: not connected (check reads the config only; give --connect to check "
            "that the database is reachable and has the cronlease tables)"
        )
    if not database["reachable"]:  # "database unreachable: ...", "cannot connect ...", ...
        error = str(database["error"])
        return error if error.startswith("database") else f"database: {error}"
    init_db = command_line("init-db")
    return {
        "present": "database: reachable; the cronlease tables are present",
        "missing": f"database: reachable; no cronlease tables yet (a replica or {init_db} "
        "creates them)",
        "earlier": "database: reachable; the cronlease tables are of an earlier version (a "
        f"replica of this version or {init_db} upgrades them)",
        "no file": "database: the SQLite file does not exist yet (a replica or "
        f"{init_db} creates it, with the tables)",
    }[database["tables"]]


def describe(config: Config, now: datetime, count: int) -> dict[str, Any]:
    """The check model: the namespace, ``count``, and each task with its next fire times."""
    return {
        "namespace": config.namespace,
        "count": count,
        "tasks": [_describe_spec(config, spec, now, count) for spec in config.tasks.values()],
        "warnings": config_warnings(config),
    }


def _describe_spec(config: Config, spec: TaskSpec, now: datetime, count: int) -> dict[str, Any]:
    upcoming = spec.schedule.upcoming(now, count)
    ttl = (
        spec.lease_ttl
        if spec.lease_ttl is not None
        else spec.schedule.ttl(upcoming[0] if upcoming else now)
    )
    zone = zone_of(spec.schedule)
    fires = []
    for fire in upcoming:
        instant = fire.astimezone(timezone.utc)
        fires.append(
            {
                "local": format_time(instant.astimezone(zone)),
                "utc": format_time(instant),
                "slot": slot_of(instant),
            }
        )
    return {
        "name": spec.name,
        "full_name": config.full_name(spec.name),
        "kind": spec.kind,
        "target": spec.target,
        "schedule": str(spec.schedule),
        "every": spec.schedule.expression if spec.schedule.kind == "every" else None,
        "cron": spec.schedule.expression if spec.schedule.kind == "cron" else None,
        "timezone": spec.schedule.timezone,
        "lease_ttl": ttl,
        "timeout": spec.timeout,
        "retries": spec.retries,
        "retry_delay": spec.retry_delay,
        "recover": spec.recover,
        "jitter": spec.jitter,
        "roles": list(spec.roles),
        "enabled": spec.enabled,
        "next": [fire["local"] for fire in fires],  # the local times alone, as before
        "fires": fires,
    }
