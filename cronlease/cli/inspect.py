"""``cronlease status`` and ``cronlease history``: the status model, as tables or JSON."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from cronlease._lease.model import RunRecord
from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping import HOUSEKEEPING_TASK
from cronlease._run.watcher import STUCK_WATCHER_TASK
from cronlease._status import (
    DeclaredTask,
    RunStatus,
    Scrubber,
    Snapshot,
    StatusReport,
    TaskStatus,
    build_report,
    by_slot,
    failing_problem,
    format_duration,
    lease_text,
    read_status,
    report_json,
    run_json,
    streak_runs,
)
from cronlease.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    Failure,
    config_from_args,
    database_url,
    missing_sqlite_file,
    open_store,
    stored_name,
)
from cronlease.cli.output import print_error, print_json, print_table, short_time
from cronlease.config import Config

# --- status ---------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    with open_store(url, config) as store:
        report = _read(store, config, missing=missing_sqlite_file(url))
    health = report.health()
    if args.json:
        print_json({**report_json(report), "config": str(config.path) if config else None})
        return EXIT_FAILURE if args.check and not health.ok else EXIT_OK
    print_table(
        [
            "TASK",
            "SCHEDULE",
            "STATE",
            "HOLDER",
            "FENCE",
            "LAST SLOT",
            "LAST RUN",
            "ABANDONED",
            "LEASE",
            "NEXT",
        ],
        [_status_row(task) for task in report.tasks],
    )
    if not report.tasks:
        print("(no tasks)" if config else "(no lease rows in this database)")
    if report.orphaned:
        print()
        print(
            "Orphaned lease rows (tasks no longer declared; kept, since deleting one "
            "resets its slot cursor):"
        )
        print_table(
            ["TASK", "STATE", "HOLDER", "FENCE", "LAST SLOT", "ABANDONED", "LEASE"],
            [
                [
                    row.name,
                    row.state,
                    row.holder or "-",
                    str(row.fence or "-"),
                    short_time(row.last_slot_time),
                    _count(row.abandoned),
                    lease_text(row.lease_expires_in),
                ]
                for row in report.orphaned
            ],
        )
    if report.clock is not None:
        print(
            f"\nclock: this host is {-report.clock.skew:+.3f} s off the database clock "
            f"(±{report.clock.error_bound:.3f} s)"
        )
    if args.check and not health.ok:
        for task in report.tasks:
            if task.shown_state == "failing":
                print_error(failing_problem(task))
        for name in health.overdue:
            print_error(f"{name} is overdue: its last tick did not start within its grace")
        return EXIT_FAILURE
    return EXIT_OK


def _read(store: LeaseStore, config: Config | None, *, missing: bool) -> StatusReport:
    """The report on the config's tasks (none: on every lease row), with the clock skew."""
    declared = None
    namespace = None
    if config is not None:
        namespace = config.namespace
        declared = [
            DeclaredTask(
                name=config.full_name(spec.name),
                schedule=spec.schedule,
                task=spec.name,
                enabled=spec.enabled,
                alert_after=spec.alert_after,
            )
            for spec in config.tasks.values()
        ]
    if missing:  # a read command must not create the SQLite file: nothing to read
        now = datetime.now(timezone.utc)
        return build_report(Snapshot(), declared, database=store.url, now=now, namespace=namespace)
    store.create_tables()
    report = read_status(
        store,
        declared,
        namespace=namespace,
        internal=(HOUSEKEEPING_TASK, STUCK_WATCHER_TASK),
        runs=streak_runs(task.alert_after for task in declared or ()),
        clock=True,
        abandoned=True,
    )
    if report.database_error is not None:
        raise Failure(report.database_error)
    return report


def _status_row(task: TaskStatus) -> list[str]:
    last = task.last_run
    if last is None:
        last_text = "never"
    elif last.duration is None:
        last_text = last.outcome
    else:
        last_text = f"{last.outcome} ({format_duration(last.duration)})"
    if last is not None and last.manual:
        last_text += " manual"
    schedule = task.schedule or "?"
    if task.enabled is False:
        schedule += " (disabled)"
    return [
        task.task,
        schedule,
        task.state + (" (overdue)" if task.overdue else ""),
        task.holder or "-",
        str(task.fence or "-"),
        short_time(task.last_slot_time),
        last_text,
        _count(task.abandoned),
        lease_text(task.lease_expires_in),
        short_time(task.next_fire),
    ]


def _count(count: int | None) -> str:
    return "-" if count is None else str(count)


# --- history --------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    name = stored_name(config, args.task)
    with open_store(url, config) as store:
        if missing_sqlite_file(url):
            records: list[RunRecord] = []
        else:
            store.create_tables()
            records = store.history(name, args.limit)
        scrub = Scrubber.of(store)
    runs = by_slot([RunStatus.of(record, scrub) for record in records])
    if args.json:
        print_json([run_json(run) for run in runs])
        return EXIT_OK
    if not runs:
        print(f"no runs of {name!r} recorded")
        return EXIT_OK
    print_table(
        ["SCHEDULED FOR", "ATTEMPT", "OUTCOME", "DURATION", "FENCE", "HOLDER", "ERROR"],
        [
            [
                short_time(run.scheduled_for) + (" (manual)" if run.manual else ""),
                str(run.attempt),
                run.outcome,
                "-" if run.duration is None else format_duration(run.duration),
                str(run.fence),
                run.holder,
                (run.error_summary or "")[:100],
            ]
            for run in runs
        ],
    )
    return EXIT_OK
