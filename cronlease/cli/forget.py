"""``cronlease forget TASK``: delete an orphaned task's lease row and its run history.

Rows are never deleted implicitly (docs/design.md §5.15): a lease row carries
its task's slot cursor. ``forget`` is the explicit way, for a task no longer
declared, and it refuses (exit 2, nothing deleted):

- a task no lease row has (nothing to forget);
- a task the config file still declares, unless ``--force``: its replicas
  would make a new row at the next tick, from a fresh slot cursor;
- a task whose lease a run holds (checked by the delete itself, on the
  database clock, so a run taking the lease at that moment keeps it).

Its run history goes with it: kept, it would read as the history of any new
task of that name, and no pruning reaches the runs of an undeclared task.
"""

from __future__ import annotations

import argparse

from cronlease._status import format_duration, holder_id
from cronlease.cli.common import (
    EXIT_OK,
    UsageError,
    config_from_args,
    database_url,
    known_task,
    no_tables,
    open_store,
    tables_exist,
)

__all__ = ["cmd_forget"]


def cmd_forget(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    with open_store(url, config) as store:
        if not tables_exist(store, url):
            raise UsageError(f"nothing to forget: {no_tables(url)}")
        name, declared = known_task(args.task, store, config)
        rows = store.leases([name])
        if not rows:
            raise UsageError(f"no lease row {name!r} in the database: nothing to forget")
        if declared and not args.force:
            assert config is not None
            raise UsageError(
                f"{name!r} is declared in {config.path}: its next tick would make a new row "
                "(remove it from the config first, or give --force)"
            )
        if store.forget([name]) != [name]:
            (row,) = store.leases([name]) or rows
            left = row.expires_at - store.database_time()
            raise UsageError(
                f"not forgotten: a run holds the lease of {name!r} (holder "
                f"{holder_id(row.holder)}, fence {row.fence}, for {format_duration(max(left, 0))} "
                "more); try again once it has finished"
            )
    print(f"forgot {name!r}: its lease row and its run history are deleted")
    return EXIT_OK
