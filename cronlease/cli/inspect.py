"""``cronlease status`` and ``cronlease history``: the status model, as tables or JSON.

Both only read: on a database without the cronlease tables they say so and
show the declared tasks without rows, creating nothing (docs/design.md §5.29).
"""

from __future__ import annotations

import argparse

from cronlease._service import (
    no_tables,
    open_store,
    read_history,
    read_report,
    tables_exist,
)
from cronlease._status import (
    failing_problem,
    invalid_problem,
    report_json,
    run_json,
)
from cronlease._status.cells import history_rows, task_notes
from cronlease.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    config_from_args,
    database_url,
)
from cronlease.cli.output import print_error, print_json, print_table
from cronlease.cli.table import orphans_summary, orphans_table, status_table

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
    for note in task_notes(report):
        print(f"\n{note}")
    if report.clock is not None:
        print(
            f"\nclock: this host is {-report.clock.skew:+.3f} s off the database clock "
            f"(±{report.clock.error_bound:.3f} s)"
        )
    if args.check and not health.ok:
        for task in report.tasks:
            if task.shown_state == "failing":
                print_error(failing_problem(task))
            elif task.name in health.invalid:
                print_error(invalid_problem(task))
        for name in health.overdue:
            print_error(f"{name} is overdue: its last tick did not start within its grace")
        return EXIT_FAILURE
    return EXIT_OK


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
