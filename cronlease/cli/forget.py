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
from typing import Any

from cronlease._service import forget
from cronlease.cli.common import EXIT_OK, config_from_args, database_url
from cronlease.cli.output import print_json

__all__ = ["cmd_forget"]


def cmd_forget(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    name, had_row = forget(url, config, args.task, force=args.force)
    model: dict[str, Any] = {"task": name, "forgotten": True, "had_lease_row": had_row}
    if args.json:
        print_json(model)
    elif model["had_lease_row"]:
        print(f"forgot {model['task']!r}: its lease row and its run history are deleted")
    else:
        print(f"forgot {model['task']!r}: it had no lease row left; its run history is deleted")
    return EXIT_OK
