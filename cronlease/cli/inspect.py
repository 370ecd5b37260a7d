"""``cronlease status`` and ``cronlease history``: leases and runs, as tables or JSON."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from cronlease._health import overdue_tasks
from cronlease._lease.database import redact
from cronlease._lease.model import LeaseInfo, RunRecord
from cronlease._scheduler import HOUSEKEEPING_TASK
from cronlease._task import Task
from cronlease._timing.clock import measure_skew
from cronlease._timing.schedule import time_of_slot
from cronlease.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    _config,
    _database,
    _full_name,
    _missing_sqlite_file,
    _open_store,
)
from cronlease.cli.output import (
    _error,
    _error_summary,
    _format_duration,
    _holder,
    _iso,
    _print_json,
    _print_table,
    _short_time,
    _zone,
)
from cronlease.config import Config, TaskSpec

# --- status and history -------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config)
    with _open_store(url) as store:
        if _missing_sqlite_file(url):
            rows: dict[str, LeaseInfo] = {}
            clock = None
            db_now = datetime.now(timezone.utc).timestamp()
            last_runs: dict[str, RunRecord] = {}
        else:
            store.create_tables()
            rows = {row.name: row for row in store.leases()}
            clock = measure_skew(store)
            db_now = store.database_time()
            names = [config.full_name(name) for name in config.tasks] if config else sorted(rows)
            last_runs = {name: runs[0] for name, runs in store.recent_runs(names, 1).items()}
    now = datetime.now(timezone.utc)
    tasks: list[dict[str, Any]] = []
    declared: set[str] = set()
    if config is not None:
        for spec in config.tasks.values():
            full = config.full_name(spec.name)
            declared.add(full)
            tasks.append(_status_of(full, spec, rows.get(full), last_runs.get(full), db_now, now))
        internal = config.full_name(HOUSEKEEPING_TASK)
        orphans = [
            _status_of(name, None, row, None, db_now, now)
            for name, row in rows.items()
            if name not in declared and name != internal and _in_namespace(name, config.namespace)
        ]
    else:
        tasks = [
            _status_of(name, None, row, last_runs.get(name), db_now, now)
            for name, row in rows.items()
        ]
        orphans = []
    overdue = _overdue(config, rows, db_now, now) if config else []
    if args.json:
        _print_json(
            {
                "database": redact(url),
                "config": str(config.path) if config else None,
                "namespace": config.namespace if config else None,
                "database_time": db_now,
                "clock_skew": None
                if clock is None
                else {"skew": clock.skew, "round_trip": clock.round_trip},
                "overdue": overdue,
                "tasks": tasks,
                "orphaned": orphans,
            }
        )
        return EXIT_FAILURE if args.check and overdue else EXIT_OK
    _print_table(
        ["TASK", "SCHEDULE", "STATE", "HOLDER", "FENCE", "LAST SLOT", "LAST RUN", "LEASE", "NEXT"],
        [_status_row(task) for task in tasks],
    )
    if not tasks:
        print("(no tasks)" if config else "(no lease rows in this database)")
    if orphans:
        print()
        print(
            "Orphaned lease rows (tasks no longer declared; kept, since deleting one "
            "resets its slot cursor):"
        )
        _print_table(
            ["TASK", "STATE", "HOLDER", "FENCE", "LAST SLOT", "LEASE"],
            [
                [
                    o["name"],
                    o["state"],
                    o["holder"] or "-",
                    str(o["fence"] or "-"),
                    _short_time(o["last_slot_time"]),
                    _lease_text(o),
                ]
                for o in orphans
            ],
        )
    if clock is not None:
        print(
            f"\nclock: this host is {-clock.skew:+.3f} s off the database clock "
            f"(±{clock.round_trip / 2:.3f} s)"
        )
    if args.check and overdue:
        for name in overdue:
            _error(f"{name} is overdue: its last tick did not start within its grace")
        return EXIT_FAILURE
    return EXIT_OK


def _overdue(config: Config, rows: dict[str, LeaseInfo], db_now: float, now: datetime) -> list[str]:
    """Declared, enabled tasks whose next tick after the last one taken is overdue."""
    tasks = [
        Task(
            name=spec.name,
            schedule=spec.schedule,
            func=_never_called,
            namespace=config.namespace,
            lease_ttl=spec.lease_ttl,
        )
        for spec in config.tasks.values()
        if spec.enabled
    ]
    return overdue_tasks(tasks, rows, now=now, db_now=db_now)


def _never_called() -> None:
    raise AssertionError("status only reads schedules")


def _in_namespace(name: str, namespace: str | None) -> bool:
    """Whether a lease row belongs to this config's namespace (no namespace: rows without one)."""
    if namespace:
        return name.startswith(f"{namespace}:")
    return ":" not in name


def _status_of(
    name: str,
    spec: TaskSpec | None,
    row: LeaseInfo | None,
    last: RunRecord | None,
    db_now: float,
    now: datetime,
) -> dict[str, Any]:
    held = row is not None and row.held(db_now)
    acquired = row is not None and row.fence > 0  # a row made by pause was never acquired
    state = row.state(db_now) if row is not None else "idle"
    upcoming = spec.schedule.upcoming(now, 1) if spec is not None and spec.enabled else []
    cursor = row.slot if row is not None and row.slot >= 0 else None
    return {
        "name": name,
        "task": spec.name if spec else name,
        "declared": spec is not None,
        "enabled": spec.enabled if spec else None,
        "schedule": str(spec.schedule) if spec else None,
        "state": state,
        "paused": bool(row and row.paused),
        "running": held,
        "holder": _holder(row.holder) if row and acquired else None,
        "fence": row.fence if row and row.fence else None,
        "last_slot": cursor,
        "last_slot_time": _iso(time_of_slot(cursor)) if cursor is not None else None,
        "lease_expires_at": row.expires_at if row and acquired else None,
        "lease_expires_in": round(row.expires_at - db_now, 3) if row and acquired else None,
        "last_run": _run_dict(last) if last else None,
        "next_fire_time": upcoming[0].astimezone(_zone(spec.schedule)).isoformat()
        if spec is not None and upcoming
        else None,
    }


def _status_row(task: dict[str, Any]) -> list[str]:
    last = task["last_run"]
    if last is None:
        last_text = "never"
    elif last["duration"] is None:
        last_text = last["outcome"]
    else:
        last_text = f"{last['outcome']} ({_format_duration(last['duration'])})"
    if last is not None and last["manual"]:
        last_text += " manual"
    schedule = task["schedule"] or "?"
    if task["enabled"] is False:
        schedule += " (disabled)"
    return [
        task["task"],
        schedule,
        task["state"],
        task["holder"] or "-",
        str(task["fence"] or "-"),
        _short_time(task["last_slot_time"]),
        last_text,
        _lease_text(task),
        _short_time(task["next_fire_time"]),
    ]


def _lease_text(task: dict[str, Any]) -> str:
    remaining = task["lease_expires_in"]
    if remaining is None:
        return "-"
    if remaining > 0:
        return f"expires in {_format_duration(remaining)}"
    return "free"


def _run_dict(run: RunRecord) -> dict[str, Any]:
    return {
        "name": run.name,
        "slot": run.slot,
        "scheduled_for": _iso(time_of_slot(run.slot)),
        "manual": run.manual,
        "fence": run.fence,
        "holder": _holder(run.holder),
        "started_at": _iso(datetime.fromtimestamp(run.started_at, timezone.utc)),
        "finished_at": _iso(datetime.fromtimestamp(run.finished_at, timezone.utc))
        if run.finished_at is not None
        else None,
        "duration": None if run.duration is None else round(run.duration, 3),
        "outcome": run.outcome,
        "error": run.error,
    }


def cmd_history(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config)
    name = _full_name(config, args.task)
    with _open_store(url) as store:
        if _missing_sqlite_file(url):
            runs: list[RunRecord] = []
        else:
            store.create_tables()
            runs = store.history(name, args.limit)
    records = [_run_dict(run) for run in runs]
    if args.json:
        _print_json(records)
        return EXIT_OK
    if not records:
        print(f"no runs of {name!r} recorded")
        return EXIT_OK
    rows = []
    for record in records:
        error = _error_summary(record["error"] or "").splitlines()
        rows.append(
            [
                _short_time(record["scheduled_for"]) + (" (manual)" if record["manual"] else ""),
                record["outcome"],
                "-" if record["duration"] is None else _format_duration(record["duration"]),
                str(record["fence"]),
                record["holder"],
                (error[0][:100] if error else ""),
            ]
        )
    _print_table(["SCHEDULED FOR", "OUTCOME", "DURATION", "FENCE", "HOLDER", "ERROR"], rows)
    return EXIT_OK
