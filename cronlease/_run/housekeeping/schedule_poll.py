"""Following the schedule rows: a replica's thread that polls for changes and applies them.

Every ``interval`` seconds (``Scheduler(schedule_poll=)``, 5 s by default) the
poll thread reads the namespace's highest change seq — one small indexed
statement, the whole cost when nothing changed — and, when it moved, reads the
namespace's rows and applies them (docs/design.md §5.37):

- a new row becomes a task (:func:`cronlease._schedules.rows.declare`: the same
  rules as a code task), fired from its schedule's next fire time;
- a row whose version changed replaces its task: the old one stops firing, the new
  one fires from its own next fire time. A run in progress is not interrupted
  (it holds the lease row, which has the same name), and the lease row's slot
  cursor survives, so no slot runs twice;
- a removed row stops firing.

A row this replica cannot load costs that schedule only: one ERROR line per
(schedule, version) for a row that is invalid, one WARNING for a job this
replica does not offer (another replica may: the task-set digests then differ,
so the cohorts split and the replicas that offer it rank its ticks among
themselves). A failed poll keeps the current schedules; the tick path already
says the outage.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from cronlease._lease.schedule_rows import ScheduleRow
from cronlease._lease.store import LeaseStore
from cronlease._run.replica_log.outage import OutageLog
from cronlease._schedules.jobs import Jobs
from cronlease._schedules.rows import declare, decode, short_name
from cronlease._task import Task
from cronlease.errors import ConfigError, StoreError

__all__ = ["DEFAULT_POLL_SECONDS", "SchedulePoll"]

logger = logging.getLogger("cronlease")

#: how often a replica looks for changed schedule rows, by default
DEFAULT_POLL_SECONDS = 5.0


#: polls between two full reads of the rows, changed or not: a row edited by hand
#: (SQL, not the model) leaves no change row, and is seen then (5 min by default)
FULL_READ_EVERY = 60


@dataclass(frozen=True)
class _Loaded:
    #: the row as read: a row read again unchanged keeps its task (and says nothing)
    row: ScheduleRow
    #: None: the row is not run here (invalid, or its job not offered)
    task: Task | None


class SchedulePoll:
    """Owns the poll thread and the tasks made from schedule rows."""

    def __init__(
        self,
        store: LeaseStore,
        namespace: str | None,
        holder: str,
        jobs: Jobs,
        code_tasks: Callable[[], Iterable[str]],
        apply: Callable[[Mapping[str, Task], Mapping[str, Task]], None],
        outage: OutageLog,
        interval: float = DEFAULT_POLL_SECONDS,
        *,
        ready: Callable[[], None] = lambda: None,
    ) -> None:
        #: the replica's tables made (raises StoreError while the database is down): a
        #: replica started with it down makes its first contact here as soon as it
        #: answers, and catches up then, not at its first tick, an hour away perhaps
        self._ready = ready
        self._store = store
        self._namespace = namespace or ""
        self._holder = holder
        self._jobs = jobs
        self._code_tasks = code_tasks
        # (removed, added): tasks by full name; a changed row is in both
        self._apply = apply
        self._outage = outage
        self.interval = interval
        self._seen_seq: int | None = None
        self._polls = 0
        self._loaded: dict[str, _Loaded] = {}
        self._offered = False
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def start(self, first_after: float = 0.0) -> None:
        """Poll on a thread of its own, the first time ``first_after`` seconds from now."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(first_after,), name="cronlease-schedules", daemon=True
        )
        self._thread.start()

    def stop(self) -> threading.Thread | None:
        """Stop polling; the thread withdraws this replica's jobs and ends."""
        self._stopping.set()
        return self._thread

    def _loop(self, wait: float) -> None:
        while not self._stopping.wait(wait):
            wait = self.interval
            try:
                self.poll()
            except StoreError as exc:
                # the tick path says the outage (once); the current schedules stay
                logger.debug("schedule rows not read: %s", exc)
                self._offered = False  # the job rows may have gone with the member row
            except Exception:  # the thread must live on
                logger.exception("following the schedule rows failed unexpectedly")
        try:
            if len(self._jobs):
                self._store.schedule_rows.withdraw(self._holder)
        except StoreError as exc:
            logger.debug("could not delete this replica's job rows: %s", exc)
        except Exception:
            logger.exception("deleting this replica's job rows failed unexpectedly")

    def poll(self) -> bool:
        """One poll, now: whether the rows changed (and were applied)."""
        with self._lock:
            self._ready()
            rows_store = self._store.schedule_rows
            self._polls += 1
            full = self._polls % FULL_READ_EVERY == 0
            # again at each full read: a replica that wrote its job rows just before its
            # first member row may have had them deleted as a dead holder's by another
            if not self._offered or full:
                rows_store.offer(self._holder, self._namespace, self._jobs.descriptions())
                self._offered = True
            with self._outage.waiting("reading the latest schedule change"):
                seq = rows_store.latest_seq(self._namespace)
            if seq == self._seen_seq and not full:
                return False
            seq, rows = rows_store.rows(self._namespace)
            self._follow(rows)
            self._seen_seq = seq
            return True

    def _follow(self, rows: list[ScheduleRow]) -> None:
        code = set(self._code_tasks())
        loaded: dict[str, _Loaded] = {}
        for row in rows:
            before = self._loaded.get(row.name)
            if before is not None and _same(before.row, row):
                loaded[row.name] = before
            else:
                loaded[row.name] = _Loaded(row, self._load(row, code))
        removed: dict[str, Task] = {}
        added: dict[str, Task] = {}
        for name, before in self._loaded.items():
            after = loaded.get(name)
            if before.task is not None and (after is None or after.task is not before.task):
                removed[name] = before.task
        for name, after in loaded.items():
            before = self._loaded.get(name)
            if after.task is not None and (before is None or before.task is not after.task):
                added[name] = after.task
        self._loaded = loaded
        if removed or added:
            self._apply(removed, added)
            for name in sorted(set(removed) | set(added)):
                if name not in added:
                    logger.info("schedule %r removed: it fires no more here", name)
                    continue
                logger.info(
                    "schedule %r %s (version %d): it fires from its next fire time",
                    name,
                    "changed" if name in removed else "added",
                    loaded[name].row.version,
                )

    def _load(self, row: ScheduleRow, code: set[str]) -> Task | None:
        name = short_name(row.name, self._namespace)
        try:
            values = decode(row)
            if name in code:
                raise ConfigError("a task declared in code here has that name")
            job = self._jobs.job(values.job)
            if job is None:
                logger.warning(
                    "schedule %r (version %d) is not run here: this replica does not offer "
                    "job %r (replicas that offer it run it)",
                    row.name,
                    row.version,
                    values.job,
                )
                return None
            return declare(name, self._namespace or None, values, job.function)
        except ConfigError as exc:
            logger.error(
                "schedule %r (version %d) is invalid and is not run: %s; changed by %s",
                row.name,
                row.version,
                exc,
                row.changed_by,
            )
            return None


def _same(before: ScheduleRow, after: ScheduleRow) -> bool:
    """The same row, whatever its change time (a write that changed nothing moves it)."""
    return before == after or (
        before.version == after.version
        and {**vars(before), "changed_at": 0} == {**vars(after), "changed_at": 0}
    )
