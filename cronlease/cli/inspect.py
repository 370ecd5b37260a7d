"""``cronlease status`` and ``cronlease history``: the status model, as tables or JSON.

Both only read: on a database without the cronlease tables they say so and
show the declared tasks without rows, creating nothing (docs/design.md §5.29).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime, timezone

from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping.pruning import HOUSEKEEPING_TASK
from cronlease._run.housekeeping.watcher import STUCK_WATCHER_TASK
from cronlease._status import (
    RunStatus,
    Scrubber,
    Snapshot,
    StatusReport,
    build_report,
    by_slot,
    failing_problem,
    format_duration,
    no_replica_words,
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
    declared_tasks,
    known_task,
    no_tables,
    open_store,
    tables_exist,
)
from cronlease.cli.output import print_error, print_json, print_table, short_time
from cronlease.cli.table import orphans_summary, orphans_table, status_table
from cronlease.config import Config

# --- status ---------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    with open_store(url, config, read_only=True) as store:
        tables = tables_exist(store, url)
        report = read_report(store, config, tables=tables)
    health = report.health()
    if args.json:
        where = {"config": str(config.path) if config else None, "tables": tables}
        print_json({**report_json(report), **where})
        return EXIT_FAILURE if args.check and not health.ok else EXIT_OK
    if not tables:
        print(no_tables(url))
    if args.orphaned:
        if report.orphaned:
            orphans_table(report.orphaned)
        else:
            print("(no orphaned lease rows)")
        return EXIT_OK
    status_table(report, wide=args.output == "wide")
    if not report.tasks and tables:
        print("(no tasks)" if config else "(no lease rows in this database)")
    if report.orphaned:
        print()
        print(orphans_summary(report.orphaned))
    for task in report.tasks:
        if task.no_live_replica:
            print(f"\n{task.task}: {no_replica_words(task.roles)}")
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


def read_report(store: LeaseStore, config: Config | None, *, tables: bool) -> StatusReport:
    """The report on the config's tasks (none: on every lease row), with the clock skew."""
    declared = declared_tasks(config)
    namespace = config.namespace if config is not None else None
    if not tables:  # a read command creates nothing: the declared tasks, with no rows
        now = datetime.now(timezone.utc)
        return build_report(Snapshot(), declared, database=store.url, now=now, namespace=namespace)
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


# --- history --------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    with open_store(url, config, read_only=True) as store:
        tables = tables_exist(store, url)
        name, runs = read_history(store, config, args.task, args.limit, tables=tables)
    if args.json:
        print_json([run_json(run) for run in runs])
        return EXIT_OK
    if not runs:
        print(f"no runs of {name!r} recorded" + ("" if tables else f": {no_tables(url)}"))
        return EXIT_OK
    print_table(*history_rows(runs))
    return EXIT_OK


def read_history(
    store: LeaseStore, config: Config | None, task: str, limit: int, *, tables: bool
) -> tuple[str, Sequence[RunStatus]]:
    """TASK's stored name and its latest runs; an unknown task is a UsageError (exit 2),
    as for pause (a declared one may not have run yet)."""
    name, _declared = known_task(task, store, config, tables=tables)
    records = store.history(name, limit) if tables else []
    scrub = Scrubber.of(store)
    return name, by_slot([RunStatus.of(record, scrub) for record in records])


def history_rows(runs: Sequence[RunStatus]) -> tuple[list[str], list[list[str]]]:
    """The headers and cells ``history`` prints (and the Django admin page shows)."""
    headers = ["SCHEDULED FOR", "ATTEMPT", "OUTCOME", "DURATION", "FENCE", "HOLDER", "ERROR"]
    return headers, [
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
    ]
