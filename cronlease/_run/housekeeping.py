"""The built-in task that prunes run history: leased like any task, so once per fleet."""

from __future__ import annotations

import logging
from collections.abc import Callable

from cronlease._lease.store import LeaseStore
from cronlease._task import Task

__all__ = ["HOUSEKEEPING_TASK", "housekeeping_task"]

#: its name (not listed in ``Scheduler.tasks``)
HOUSEKEEPING_TASK = "cronlease-housekeeping"

logger = logging.getLogger("cronlease")


def housekeeping_task(
    store: LeaseStore, names: Callable[[], list[str]], retention: float, namespace: str | None
) -> Task:
    """Every hour, delete the finished runs older than ``retention`` seconds of the tasks
    ``names()`` returns: only this scheduler's own, since a database shared by several
    applications must not have one prune another's history (docs/design.md §5.12)."""

    def prune_history() -> None:
        removed = store.prune(names(), retention)
        if removed:
            logger.info("pruned %d run(s) older than %.0f s from the history", removed, retention)

    return Task.declare(
        prune_history, every="1h", name=HOUSEKEEPING_TASK, namespace=namespace, catchup="skip"
    )
