"""cronlease's own tasks: their names, and the one way they are declared.

The stuck watcher and history housekeeping are leased and run like any task
(so once per fleet), but they are the library's, not the user's: a task
declared here is :attr:`Task.builtin <cronlease._task.Task.builtin>`, which
keeps it out of the user's view of the replica — no event to listeners (pings,
OpenTelemetry, Sentry included), no Stats counter, no per-tick log line — and
:data:`BUILTIN_TASKS` keeps it out of the status read model's list of declared
tasks (docs/design.md §4.11). Their trouble (a body raising, an outage) is
still logged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cronlease._task import Task

__all__ = ["BUILTIN_TASKS", "HOUSEKEEPING_TASK", "STUCK_WATCHER_TASK", "builtin_task"]

#: history pruning (cronlease/_run/housekeeping/pruning.py), not listed in ``Scheduler.tasks``
HOUSEKEEPING_TASK = "cronlease-housekeeping"
#: the stuck watcher (cronlease/_run/housekeeping/watcher.py), not listed in ``Scheduler.tasks``
STUCK_WATCHER_TASK = "cronlease-stuck-watcher"
#: the names of every built-in task: reserved, and left out of the status' declared tasks
BUILTIN_TASKS = (HOUSEKEEPING_TASK, STUCK_WATCHER_TASK)


def builtin_task(func: Callable[..., Any], *, name: str, every: str, namespace: str | None) -> Task:
    """Declare one of cronlease's own tasks: leased, a missed pass skipped (the next one
    does its work), silent to users."""
    if name not in BUILTIN_TASKS:
        raise ValueError(f"{name!r} is not a built-in task's name")
    return Task.declare(
        func, every=every, name=name, namespace=namespace, catchup="skip", builtin=True
    )
