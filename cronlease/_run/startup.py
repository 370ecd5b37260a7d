"""A replica's first contact with the database: schedule conflicts, then catch-up.

Catch-up is one more way a run begins: each missed tick goes down the tick
path as a ``catch_up`` tick (exempt from the grace), through the same
admission, acquisition and worker pool as a scheduled one, so the slot gate
makes it once fleet-wide even when many replicas start together, and
``max_workers`` bounds it (docs/design.md §5.8). A tick that fell due while
the lease was still held is not missed: it was skipped for overlap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from cronlease._lease.model import LeaseInfo, Outcome
from cronlease._lease.store import LeaseStore
from cronlease._run.runner import TickRunner
from cronlease._run.stopping import SLICE_SECONDS
from cronlease._run.timer.ticks import Tick
from cronlease._stats import Stats
from cronlease._task import Task
from cronlease.errors import StoreError

__all__ = ["CatchUp", "report_schedule_conflicts"]

logger = logging.getLogger("cronlease")


def report_schedule_conflicts(
    rows: list[LeaseInfo], tasks: Mapping[str, Task], stats: Stats
) -> None:
    """Log each task this replica declares differently from the schedule it last ran with."""
    for row in rows:
        task = tasks.get(row.name)
        if task and row.fingerprint and row.fingerprint != task.schedule.fingerprint:
            stats.add("schedule_conflicts")
            logger.error(
                "task %s is declared here as %r but was last run as %r: replicas disagree "
                "(during a rolling deploy both schedules may run)",
                row.name,
                task.schedule.fingerprint,
                row.fingerprint,
            )


class CatchUp:
    """The catch-up of one ``start()``: one thread, joined by shutdown.

    It reads the lease rows (in the caller's thread), then hands the missed
    ticks down the tick path in rounds — the first missed tick of each task,
    then (policy ``all``) the next one of each once its previous run ended —
    through ``runner``'s normal admission and acquisition, winners run on the
    replica's worker pool (``submit``) like any scheduled tick. Shutdown stops accepting first, so a
    round in flight is skipped as ``shutdown`` or its winners are waited for
    like any run; no tick is acquired after the shutdown joined this thread.
    """

    def __init__(
        self,
        runner: TickRunner,
        store: LeaseStore,
        tasks: Mapping[str, Task],
        stats: Stats,
        submit: Callable[[Callable[[], Outcome]], object],
    ) -> None:
        self._runner = runner
        self._store = store
        # a disabled task is never fired by its schedule, nor caught up
        self._tasks = {name: task for name, task in tasks.items() if task.enabled}
        self._stats = stats
        self._submit = submit
        #: the thread running the rounds (None if nothing was missed), for shutdown to join
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Read the lease rows here (a statement in flight on another thread would make a
        fork right after ``start()`` less safe), then run the rounds on the thread."""
        plan = self._plan()
        if plan:
            self.thread = threading.Thread(
                target=self._run, args=(plan,), name="cronlease-catchup", daemon=True
            )
            self.thread.start()

    def _run(self, plan: dict[str, tuple[Task, list[datetime]]]) -> None:
        try:
            while plan and self._runner.accepting:
                batch = [Tick(task, missed[0], "catch_up") for task, missed in plan.values()]
                plan = {name: (t, m[1:]) for name, (t, m) in plan.items() if m[1:]}
                self._offer(batch)
                # the next tick of a task waits for its previous run: overlap would skip it
                names = set(plan)
                while names and self._runner.accepting:
                    if self._runner.wait_ended(names, SLICE_SECONDS):
                        break
        except Exception:  # a catch-up must never take the replica down
            logger.exception("unexpected error during catch-up")

    def _offer(self, ticks: list[Tick]) -> None:
        """Acquire ``ticks``, those no worker slot was free for again as slots free:
        a catch-up tick has no grace to run out, so it waits for a worker."""
        freed = threading.Event()
        while ticks and self._runner.accepting:
            decision = self._runner.acquire_ticks(
                ticks, dispatch=self._counted, wait_for_capacity=True
            )
            ticks = [tick for _, tick in decision.starved]
            if ticks:
                freed.clear()
                self._runner.workers.when_free(freed.set)
                while not freed.wait(SLICE_SECONDS) and self._runner.accepting:
                    pass

    def _counted(self, run: Callable[[], Outcome]) -> None:
        self._stats.add("ticks_caught_up")
        self._submit(run)

    def _plan(self) -> dict[str, tuple[Task, list[datetime]]]:
        now = datetime.now(timezone.utc)
        try:
            rows = self._store.leases(sorted(self._tasks))
        except StoreError as exc:
            logger.warning("catch-up skipped: %s", exc)
            return {}
        plan: dict[str, tuple[Task, list[datetime]]] = {}
        for row in rows:
            task = self._tasks.get(row.name)
            if task is None:
                continue
            # a run row that never ran holds no lease: fence 0 (made by pause)
            busy_until = row.expires_at if row.fence > 0 else None
            missed = task.missed_ticks(row.slot, now, busy_until)
            if missed:
                logger.info(
                    "%s: %d tick(s) were missed while no replica ran it; catching up (%s)",
                    task.full_name,
                    len(missed),
                    task.catchup,
                )
                plan[task.full_name] = (task, missed)
        return plan
