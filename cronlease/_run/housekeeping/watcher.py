"""The stuck watcher: a built-in task, leased like any (so once per fleet), every minute.

A replica that dies mid-run leaves its run row ``running``. The next
acquirer of that task marks it ``abandoned`` — but a paused, removed or
weekly task may have no next acquirer for days. The watcher marks such runs
fleet-wide, every task in the database included (paused, removed, other
namespaces): runs still ``running`` whose lease expired or moved on to
another fence (:meth:`LeaseStore.abandon_expired`). Those of ``recover=True``
tasks stay candidates of the attempt poll (:mod:`cronlease._run.housekeeping.attempt_poll`),
which recovers them whether or not the watcher saw them first.

Every scheduler declares it, whatever its tasks ask (docs/design.md §4.11):
one leased statement a minute per fleet (per namespace), and a run whose
replica died is marked within ``lease_ttl`` + :data:`WATCH_EVERY` (plus the
pass's own lateness) of its last renewal. A built-in task
(:mod:`cronlease._run.housekeeping.builtin`): the replicas competing for its
lease each minute send no event, count nothing and log no per-tick line.
"""

from __future__ import annotations

import logging

from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping.builtin import STUCK_WATCHER_TASK, builtin_task
from cronlease._task import Task

__all__ = ["ABANDON_BATCH", "ABANDON_ROUNDS", "STUCK_WATCHER_TASK", "WATCH_EVERY", "watcher_task"]

#: runs one statement marks at most, and statements one pass makes at most
ABANDON_BATCH = 1000
ABANDON_ROUNDS = 10
#: its schedule, read when a scheduler declares it; a module value so a test replica
#: can shorten the minute the process tests would otherwise wait for (not an option:
#: a fleet whose replicas disagree on it would share one lease between two schedules)
WATCH_EVERY = "1m"

logger = logging.getLogger("cronlease")


def watch(store: LeaseStore) -> int:
    """One pass: mark the stuck runs, in bounded statements; returns how many."""
    marked: list[tuple[str, int, int]] = []
    for _ in range(ABANDON_ROUNDS):
        batch = store.abandon_expired(ABANDON_BATCH)
        marked.extend(batch)
        if len(batch) < ABANDON_BATCH:
            break
    if marked:
        shown = ", ".join(
            f"{name} slot {slot} attempt {attempt}" for name, slot, attempt in marked[:5]
        )
        more = f" and {len(marked) - 5} more" if len(marked) > 5 else ""
        logger.info(
            "stuck watcher: %d run(s) whose replica stopped renewing their lease mid-run "
            "marked abandoned: %s%s",
            len(marked),
            shown,
            more,
        )
    return len(marked)


def watcher_task(store: LeaseStore, namespace: str | None) -> Task:
    def stuck_watcher() -> None:
        watch(store)

    return builtin_task(
        stuck_watcher, every=WATCH_EVERY, name=STUCK_WATCHER_TASK, namespace=namespace
    )
