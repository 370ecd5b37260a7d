"""``cronlease forget TASK``: delete an orphaned task's lease row and its run history.

Rows are never deleted implicitly (docs/design.md §5.15): a lease row carries
its task's slot cursor. ``forget`` is the explicit way, for a task no longer
declared, and it refuses (exit 2, nothing deleted):

- a task with neither a lease row nor runs (nothing to forget);
- a task the config file still declares, unless ``--force``: its replicas
  would make a new row at the next tick, from a fresh slot cursor;
- a task whose lease a run holds, or with a run still ``running`` after its
  lease ended (its process may still be going). Both are decided by the
  deleting transaction itself, on the database clock.

Its run history goes with it: kept, it would read as the history of any new
task of that name, and no pruning reaches the runs of an undeclared task. A
task with runs but no row (a ``forget`` stopped between two history batches)
has its history deleted: running the command again finishes the job.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from cronlease._lease.names import normal_form
from cronlease._lease.store import LeaseStore
from cronlease._status import format_duration, format_time, holder_id
from cronlease.cli.common import (
    EXIT_OK,
    UsageError,
    config_from_args,
    database_url,
    no_tables,
    open_store,
    stored_name,
    tables_exist,
)
from cronlease.config import Config

__all__ = ["cmd_forget"]

#: runs read back to name the one still ``running`` when forget refuses
_RUNS_READ = 200


def cmd_forget(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    with open_store(url, config) as store:
        if not tables_exist(store, url):
            raise UsageError(f"nothing to forget: {no_tables(url)}")
        name = stored_name(config, args.task)
        had_row = bool(store.leases([name]))
        if not had_row and not store.history(name, limit=1):
            raise UsageError(
                f"no lease row and no runs of {name!r} in the database: nothing to forget"
            )
        _refuse_declared(config, args, name)
        if store.forget([name]) != [name]:
            raise UsageError(f"not forgotten: {_why_kept(store, name)}")
    if had_row:
        print(f"forgot {name!r}: its lease row and its run history are deleted")
    else:
        print(f"forgot {name!r}: it had no lease row left; its run history is deleted")
    return EXIT_OK


def _refuse_declared(config: Config | None, args: argparse.Namespace, name: str) -> None:
    """Exit 2 for a task the config declares, unless --force."""
    if config is None or args.force:
        return
    if normal_form(args.task) in config.tasks:
        raise UsageError(
            f"{name!r} is declared in {config.path}: its next tick would make a new row "
            "(remove it from the config first, or give --force)"
        )


def _why_kept(store: LeaseStore, name: str) -> str:
    """What kept the row, read after the deleting transaction said it stays."""
    now = store.database_time()
    rows = store.leases([name])
    if rows and rows[0].expires_at >= now:
        row = rows[0]
        return (
            f"a run holds the lease of {name!r} (holder {holder_id(row.holder)}, fence "
            f"{row.fence}, for {format_duration(row.expires_at - now)} more); try again once "
            "it has finished"
        )
    running = [run for run in store.history(name, limit=_RUNS_READ) if run.outcome == "running"]
    if not running:
        return f"the lease row of {name!r} changed meanwhile; try again"
    run = running[-1]  # the oldest: the one most likely stale
    ended = f" {format_duration(now - rows[0].expires_at)} ago" if rows else ""
    scheduled = format_time(datetime.fromtimestamp(run.scheduled_for, timezone.utc))
    return (
        f"the run of {name!r} scheduled for {scheduled} (attempt {run.attempt}, holder "
        f"{holder_id(run.holder)}, fence {run.fence}) is still 'running' though its lease "
        f"ended{ended}, and no replica's stuck-run watcher has recorded it abandoned yet "
        "(any replica of this database does within a minute): start one or wait, then "
        "forget again"
    )
