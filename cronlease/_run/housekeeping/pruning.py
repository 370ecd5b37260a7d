"""The built-in task that prunes run history: leased like any task, so once per fleet.

Every hour it deletes this scheduler's own tasks' finished runs older than
``history_retention`` and, with ``history_keep``, those beyond each task's
newest ``history_keep`` (docs/design.md §5.12). In bounded batches: each
statement deletes at most :data:`PRUNE_BATCH` rows and commits, so no lock is
held for long, and a pass stops after :data:`PRUNE_BUDGET_SECONDS` or
:data:`PRUNE_BUDGET_ROWS`; the next pass goes on where it stopped.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping.builtin import HOUSEKEEPING_TASK, builtin_task
from cronlease._task import Task
from cronlease._timing.schedule import parse_duration
from cronlease.errors import ConfigError

__all__ = [
    "HOUSEKEEPING_EVERY",
    "HOUSEKEEPING_TASK",
    "PRUNE_BATCH",
    "PRUNE_BUDGET_ROWS",
    "PRUNE_BUDGET_SECONDS",
    "Budget",
    "Pruned",
    "check_history_keep",
    "housekeeping_task",
    "prune_history",
]

#: its schedule, read when a scheduler declares it; a module value, like the stuck
#: watcher's, so a test can make it due within seconds
HOUSEKEEPING_EVERY = "1h"
#: rows one statement deletes at most (one transaction each)
PRUNE_BATCH = 2000
#: how long one pass may prune, and how many rows, before it leaves the rest for the next
PRUNE_BUDGET_SECONDS = 240.0
PRUNE_BUDGET_ROWS = 2_000_000
#: the longest pause between two batches (each pause is as long as the batch took)
MAX_PAUSE_SECONDS = 0.2
#: task names per statement when pruning by age
NAMES_PER_STATEMENT = 500

logger = logging.getLogger("cronlease")


@dataclass(frozen=True)
class Budget:
    """How much one pass may do: rows per statement, rows in all, seconds in all."""

    batch: int = PRUNE_BATCH
    rows: int = PRUNE_BUDGET_ROWS
    seconds: float = PRUNE_BUDGET_SECONDS

    def __post_init__(self) -> None:
        if self.batch < 1 or self.rows < 1 or not self.seconds > 0:
            raise ValueError(f"a pruning budget is positive, got {self}")


@dataclass(frozen=True)
class Pruned:
    """What one pass removed; ``complete`` False when its budget ran out first."""

    old: int = 0
    beyond: int = 0
    complete: bool = True

    @property
    def removed(self) -> int:
        return self.old + self.beyond


def check_history_keep(value: object) -> int | None:
    """``history_keep``: None (no bound by count) or a whole number of runs, at least 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"history_keep must be a whole number of runs, at least 1; got {value!r}")
    return value


def prune_history(
    store: LeaseStore,
    names: Sequence[str],
    retention: float | None,
    keep: int | None,
    budget: Budget = Budget(),
) -> Pruned:
    """One pass: by age, then by count per task, batch by batch, within ``budget``."""
    deadline = time.monotonic() + budget.seconds
    old = beyond = 0

    def spent() -> bool:
        return old + beyond >= budget.rows or time.monotonic() >= deadline

    def batch(statement: Callable[[], int]) -> int:
        began = time.monotonic()
        removed = statement()
        if removed >= budget.batch:
            # Leave the database to the tick path as long as the batch held it: on
            # SQLite a writer that backs off would otherwise never find it free.
            time.sleep(min(time.monotonic() - began, MAX_PAUSE_SECONDS))
        return removed

    if retention is not None:
        for start in range(0, len(names), NAMES_PER_STATEMENT):
            chunk = names[start : start + NAMES_PER_STATEMENT]
            while True:
                removed = batch(functools.partial(store.prune_old, chunk, retention, budget.batch))
                old += removed
                if spent():
                    return Pruned(old, beyond, complete=False)
                if removed < budget.batch:
                    break
    if keep is not None:
        for name in names:
            while True:
                removed = batch(functools.partial(store.prune_beyond, name, keep, budget.batch))
                beyond += removed
                if spent():
                    return Pruned(old, beyond, complete=False)
                if removed < budget.batch:
                    break
    return Pruned(old, beyond)


def housekeeping_task(
    store: LeaseStore,
    names: Callable[[], list[str]],
    retention: object,
    keep: object,
    namespace: str | None,
) -> Task | None:
    """Every hour, prune the history of the tasks ``names()`` returns: only this
    scheduler's own, since a database shared by several applications must not have one
    prune another's history (docs/design.md §5.12). None when neither bound is set."""
    max_age = None if retention is None else parse_duration(retention, what="history_retention")
    seconds = None if max_age is None else max_age.total_seconds()
    bound = check_history_keep(keep)
    if seconds is None and bound is None:
        return None

    def prune() -> None:
        pruned = prune_history(store, names(), seconds, bound)
        if pruned.removed:
            logger.info(
                "pruned %d run(s) from the history: %d older than %s, %d beyond the newest %s "
                "per task%s",
                pruned.removed,
                pruned.old,
                "-" if seconds is None else f"{seconds:.0f} s",
                pruned.beyond,
                "-" if bound is None else bound,
                "" if pruned.complete else "; the pass used its budget, the next one goes on",
            )

    return builtin_task(
        prune, every=HOUSEKEEPING_EVERY, name=HOUSEKEEPING_TASK, namespace=namespace
    )
