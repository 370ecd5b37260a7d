"""The attempt poll: one thread that finds slots owed another attempt and offers them.

One role (docs/design.md §4.11), like the catch-up thread: about every
:data:`POLL_SECONDS` it asks the database for the latest attempt of each
task that wants retries or recovery (:meth:`LeaseStore.attempt_candidates`,
one statement), lets the policy (:mod:`cronlease._run.recording.attempts`) decide each,
and hands those due down the tick path as ``attempt`` ticks — the same
admission, capacity and acquisition as any tick, winners on the replica's
worker pool. It wakes sooner when a retry falls due before the next poll.

Budget: a pass starts at most :data:`ATTEMPTS_PER_PASS` attempts and never
more than the replica's free workers, so a fleet-wide crash (every lease
expiring at once) is recovered in steps, oldest first, not in one burst; the
rest are still candidates at the next pass. A refused attempt (another
replica won it) costs nothing more: the next pass no longer sees it.

The thread runs only while some declared task has ``retries > 0`` or
``recover=True``: without one it never starts, and never queries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from cronlease._lease.model import AttemptCandidate, Outcome
from cronlease._run.recording.attempts import Plan, plan
from cronlease._run.runner import TickRunner
from cronlease._run.timer.ticks import Follows, Tick
from cronlease._task import Task
from cronlease._timing.schedule import time_of_slot
from cronlease.errors import StoreError

__all__ = ["ATTEMPTS_PER_PASS", "NAMES_PER_QUERY", "POLL_SECONDS", "AttemptPoll"]

logger = logging.getLogger("cronlease")

#: how often the database is asked for candidates
POLL_SECONDS = 0.5
#: attempts one pass of one replica starts at most
ATTEMPTS_PER_PASS = 8
#: task names per candidates query (a bound on the statement's parameters)
NAMES_PER_QUERY = 500
#: the shortest wait between two passes, however soon a retry falls due
MIN_WAIT_SECONDS = 0.02


class AttemptPoll:
    """Owns the attempt poll thread of one replica; started on demand, stopped by shutdown."""

    def __init__(
        self,
        runner: TickRunner,
        tasks: Callable[[], Sequence[Task]],  # those that want attempts
        submit: Callable[[Callable[[], Outcome]], object],
        *,
        interval: float = POLL_SECONDS,
        budget: int = ATTEMPTS_PER_PASS,
    ) -> None:
        self._runner = runner
        self._store = runner.store
        self._tasks = tasks
        self._submit = submit
        self._interval = interval
        self._budget = budget
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        #: the poll's thread (None until a task wants attempts), for shutdown to join
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread if a task wants attempts, unless it runs already (or the poll
        was stopped): call it again when a task is declared."""
        with self._lock:
            if self.thread is not None or self._stopped.is_set() or not self._tasks():
                return
            self.thread = threading.Thread(
                target=self._loop, name="cronlease-attempts", daemon=True
            )
            self.thread.start()

    def stop(self) -> threading.Thread | None:
        """Stop after the pass in progress; returns the thread, to join."""
        with self._lock:
            self._stopped.set()
            return self.thread

    def _loop(self) -> None:
        while not self._stopped.is_set() and self._runner.accepting:
            try:
                wait = self.poll()
            except Exception:  # the poll must never take the replica down
                logger.exception("unexpected error looking for attempts to start")
                wait = self._interval
            self._stopped.wait(wait)

    def poll(self) -> float:
        """One pass: start the attempts due now, within the budget; returns the seconds
        until the next pass."""
        tasks = {task.full_name: task for task in self._tasks()}
        if not tasks or not self._runner.schema_ready:
            return self._interval
        try:
            candidates = self._candidates(sorted(tasks))
        except StoreError as exc:
            logger.debug("attempts not looked for: %s", exc)
            return self._interval
        wait = self._interval
        due: list[tuple[AttemptCandidate, Plan]] = []
        for candidate in candidates:
            task = tasks.get(candidate.name)
            decided = None if task is None else plan(candidate, task)
            if decided is None:
                continue
            if decided.ready(candidate.db_now):
                due.append((candidate, decided))
            else:
                wait = min(wait, decided.due - candidate.db_now)
        if due:
            self._offer(tasks, due)
        return max(MIN_WAIT_SECONDS, wait)

    def _candidates(self, names: list[str]) -> list[AttemptCandidate]:
        found: list[AttemptCandidate] = []
        for start in range(0, len(names), NAMES_PER_QUERY):
            found.extend(self._store.attempt_candidates(names[start : start + NAMES_PER_QUERY]))
        return found

    def _offer(self, tasks: dict[str, Task], due: list[tuple[AttemptCandidate, Plan]]) -> None:
        """The oldest due attempts, as many as the budget and the free workers allow."""
        room = min(self._budget, self._runner.workers.free)
        if room <= 0:
            return
        due.sort(key=lambda pair: (pair[1].due, pair[0].slot, pair[0].name))
        ticks = [
            Tick(
                tasks[candidate.name],
                time_of_slot(candidate.slot),
                "attempt",
                Follows(candidate.fence, decided.attempt, decided.recovering, decided.until),
            )
            for candidate, decided in due[:room]
        ]
        # starved ones (a worker taken meanwhile) are candidates again at the next pass
        self._runner.acquire_ticks(ticks, dispatch=self._submit, wait_for_capacity=True)
