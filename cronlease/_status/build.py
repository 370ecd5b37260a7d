"""The one function that builds the status model, and the one read of the store it needs.

:func:`build_report` is pure (rows in, :class:`StatusReport` out), so every
rule can be tested without a database; :func:`read_status` reads the rows
and calls it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import cast

from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.model import LeaseInfo, RunRecord
from cronlease._lease.store import LeaseStore
from cronlease._lease.table_state import TableState, missing_sqlite_file, table_state
from cronlease._roles import can_run
from cronlease._schedules.model import Schedules, StoredSchedule
from cronlease._status.model import RunStatus, StatusReport, TaskState, TaskStatus, by_slot
from cronlease._status.rules import (
    DeclaredTask,
    Scrubber,
    StoredTask,
    failure_streak,
    full_name,
    holder_id,
    in_namespace,
    is_overdue,
)
from cronlease._status.text import zone_of
from cronlease._timing.clock import ClockCheck, measure_skew
from cronlease.errors import StatementError, StoreError

__all__ = ["Snapshot", "build_report", "read_snapshot", "read_status"]

NO_SCRUBBING = Scrubber(None)


@dataclass(frozen=True)
class Snapshot:
    """What was read from the store: lease rows, recent runs by task, the database clock.

    ``abandoned`` counts the runs recorded ``abandoned`` by task (a task without
    any is absent), None when not read. ``error`` says why the read failed (then
    nothing else was kept); ``answered`` that the database answered it with an error
    about the statement (a renamed column, a missing grant), not that it was out of
    reach. ``runs_limit`` is how many runs per task were asked
    for (a task with that many may have more: its failure streak is "at least");
    None: ``runs`` hold each task's whole history.
    """

    leases: tuple[LeaseInfo, ...] = ()
    runs: Mapping[str, Sequence[RunRecord]] = field(default_factory=dict)
    db_now: float | None = None
    clock: ClockCheck | None = None
    error: str | None = None
    abandoned: Mapping[str, int] | None = None
    runs_limit: int | None = None
    answered: bool = False
    #: the roles of each live replica (member row) of the namespace; None: not read
    member_roles: tuple[frozenset[str], ...] | None = None
    #: the namespace's schedule rows as declared tasks (§5.37); None: not read (not asked,
    #: or a database without the schedule tables)
    schedules: tuple[StoredTask, ...] | None = None

    def __post_init__(self) -> None:
        if self.answered and self.error is None:
            raise ValueError("only a failed read was answered with an error")
        kept = (
            self.leases
            or self.runs
            or self.db_now is not None
            or self.abandoned is not None
            or self.schedules is not None
        )
        if self.error is not None and kept:
            raise ValueError("a failed read keeps no rows")
        if self.leases and self.db_now is None:
            raise ValueError("lease rows are judged on the database clock: give db_now")


def build_report(
    snapshot: Snapshot,
    declared: Sequence[DeclaredTask] | None,
    *,
    database: str,
    now: datetime,
    namespace: str | None = None,
    internal: Collection[str] = (),
    since: datetime | None = None,
    scrub: Scrubber = NO_SCRUBBING,
    skipped: Mapping[str, Mapping[str, int]] | None = None,
) -> StatusReport:
    """The status of ``declared`` tasks (None: every lease row is a task), from ``snapshot``.

    Lease rows of ``namespace`` that no declared task owns are orphaned,
    except those of ``internal`` tasks (declared names, e.g. the built-in
    housekeeping task). ``now`` is this host's clock (next fire times); lease
    expiry and overdue ticks are judged on the database clock, never this host's. ``since`` is as
    for :func:`~cronlease._status.rules.is_overdue`. ``skipped`` is the building replica's
    tally of skipped ticks by stored name and reason (``Scheduler.skipped_ticks``).
    """
    rows = {row.name: row for row in snapshot.leases}
    db_now = snapshot.db_now

    def status(task: DeclaredTask | None, name: str) -> TaskStatus:
        row = rows.get(name)
        read = snapshot.runs.get(name, ())
        runs = by_slot([RunStatus.of(run, scrub) for run in read])
        counted = snapshot.abandoned
        abandoned = None if counted is None else counted.get(name, 0)
        limit = snapshot.runs_limit
        streak = failure_streak(
            [run.outcome for run in runs], read_all=limit is None or len(read) < limit
        )
        status = _task_status(name, task, row, runs, abandoned, db_now, now, since)
        return replace(
            status,
            consecutive_failures=streak[0],
            streak_capped=streak[1],
            alert_after=None if task is None else task.alert_after,
            skipped=(skipped or {}).get(name, {}),
            roles=() if task is None else task.roles,
            no_live_replica=task is not None and _no_live_replica(task, snapshot.member_roles),
        )

    def stored(row: StoredTask) -> TaskStatus:
        if row.declared is None:  # invalid: its lease row and runs, under the row's words
            shown = replace(
                status(None, row.name),
                declared=True,
                enabled=row.enabled,
                schedule=row.schedule,
                alert_after=row.alert_after,
            )
        else:
            shown = status(row.declared, row.name)
        return replace(
            shown,
            task=row.task,
            source="database",
            job=row.job,
            invalid=row.invalid,
            unoffered=row.unoffered,
        )

    # a code task's name wins over a row of the same name (replicas do not load such a row)
    coded = {task.name for task in declared or ()}
    from_rows = [row for row in snapshot.schedules or () if row.name not in coded]
    row_names = {row.name for row in from_rows}
    if declared is None:
        tasks = [status(None, name) for name in sorted(rows) if name not in row_names]
        orphaned = []
    else:
        tasks = [status(task, task.name) for task in declared]
        known = coded | row_names | {full_name(n, namespace) for n in internal}
        orphaned = [
            status(None, name)
            for name in sorted(rows)
            if name not in known and in_namespace(name, namespace)
        ]
    # Sorted by name, as lease rows are: a long list is read by looking a name up.
    tasks = sorted([*tasks, *(stored(row) for row in from_rows)], key=lambda t: t.name)
    return StatusReport(
        generated_at=now.astimezone(timezone.utc),
        database=database,
        namespace=namespace,
        database_time=None if db_now is None else datetime.fromtimestamp(db_now, timezone.utc),
        database_error=None if snapshot.error is None else scrub(snapshot.error),
        database_answered=snapshot.answered,
        clock=snapshot.clock,
        tasks=tuple(tasks),
        orphaned=tuple(orphaned),
    )


def _no_live_replica(task: DeclaredTask, member_roles: tuple[frozenset[str], ...] | None) -> bool:
    if not task.roles or not task.enabled or member_roles is None:
        return False
    return not any(can_run(task.roles, roles) for roles in member_roles)


def _task_status(
    name: str,
    task: DeclaredTask | None,
    row: LeaseInfo | None,
    runs: tuple[RunStatus, ...],
    abandoned: int | None,
    db_now: float | None,
    now: datetime,
    since: datetime | None,
) -> TaskStatus:
    acquired = row is not None and row.fence > 0  # a row made by pause was never acquired
    # a paused task fires nothing until it is resumed: it has no next fire time to show
    paused = row is not None and row.paused
    runs_next = task is not None and task.enabled and not paused
    upcoming = task.schedule.upcoming(now, 1) if task is not None and runs_next else []
    running = row is not None and db_now is not None and row.held(db_now)
    last_holder = holder_id(row.holder) if row is not None and acquired else None
    return TaskStatus(
        name=name,
        task=task.task if task is not None else name,
        declared=task is not None,
        enabled=None if task is None else task.enabled,
        schedule=None if task is None else str(task.schedule),
        state="idle" if row is None else cast(TaskState, row.state(db_now)),
        running=running,
        # a finished or expired lease's holder is history (its runs say who ran them)
        holder=last_holder if running else None,
        last_holder=last_holder,
        fence=row.fence if row is not None and acquired else None,
        last_slot=row.slot if row is not None and row.slot >= 0 else None,
        lease_expires_at=(
            datetime.fromtimestamp(row.expires_at, timezone.utc)
            if row is not None and acquired
            else None
        ),
        lease_expires_in=(
            round(row.expires_at - db_now, 3)
            if row is not None and acquired and db_now is not None
            else None
        ),
        next_fire=upcoming[0].astimezone(zone_of(task.schedule)) if task and upcoming else None,
        overdue=(
            task is not None
            and db_now is not None
            and is_overdue(task, row, db_now=db_now, since=since)
        ),
        runs=runs,
        abandoned=abandoned,
        alert_after=None if task is None else task.alert_after,
    )


def read_status(
    store: LeaseStore,
    declared: Sequence[DeclaredTask] | None,
    *,
    namespace: str | None = None,
    internal: Collection[str] = (),
    runs: int = 1,
    orphans: bool = True,
    clock: bool = False,
    abandoned: bool = False,
    since: datetime | None = None,
    empty_without_tables: bool = False,
    skipped: Mapping[str, Mapping[str, int]] | None = None,
    fleet: bool = True,
    schedules: bool = False,
) -> StatusReport:
    """Read the store and build the report; never raises :class:`StoreError`.

    The options of the read are :func:`read_snapshot`'s, ``skipped`` is
    :func:`build_report`'s. Never creates tables.
    """
    now = datetime.now(timezone.utc)
    snapshot = read_snapshot(
        store,
        declared,
        runs=runs,
        orphans=orphans,
        clock=clock,
        abandoned=abandoned,
        empty_without_tables=empty_without_tables,
        fleet=fleet,
        namespace=namespace,
        schedules=schedules,
    )
    return build_report(
        snapshot,
        declared,
        database=store.url,
        now=now,
        namespace=namespace,
        internal=internal,
        since=since,
        scrub=Scrubber.of(store),
        skipped=skipped,
    )


def read_snapshot(
    store: LeaseStore,
    declared: Sequence[DeclaredTask] | None,
    *,
    runs: int = 1,
    orphans: bool = True,
    clock: bool = False,
    abandoned: bool = False,
    empty_without_tables: bool = False,
    fleet: bool = False,
    namespace: str | None = None,
    schedules: bool = False,
) -> Snapshot:
    """What the report of ``declared`` needs, read from ``store``; never raises StoreError.

    ``runs`` recent runs per task (0: none read; ``rules.streak_runs`` judges the
    failure streaks, as many as the largest ``alert_after`` and one); ``orphans`` False reads the
    declared tasks' rows only (a probe need not read the whole table);
    ``clock`` measures this host's skew; ``abandoned`` counts each task's
    abandoned runs (orphaned rows' too). A failed read is the snapshot's
    ``error``, unless ``empty_without_tables`` and the tables do not exist yet
    (then the snapshot is empty). ``fleet`` reads the live member rows of
    ``namespace`` when a declared task has roles (who can run it; a failed read of
    them alone leaves ``member_roles`` None). ``schedules`` reads the namespace's
    schedule rows and the jobs live replicas offer (a database without those tables
    leaves ``schedules`` None); their tasks' runs are read with the others. Round trips:
    lease rows, the clock, schedule rows and offered jobs, recent runs, abandoned counts
    and member rows, one each (per 500 names).
    """
    if empty_without_tables and missing_sqlite_file(store.engine.url):
        return Snapshot()  # not opened: opening a SQLite path creates the file
    try:
        only = None if declared is None or orphans else sorted(t.name for t in declared)
        leases = tuple(store.leases(only))
        measured = measure_skew(store) if clock else None
        db_now = measured.database_time if measured else store.database_time()
        stored = _schedule_rows(store, namespace) if schedules else None
        names = [t.name for t in declared] if declared is not None else [r.name for r in leases]
        names = sorted({*names, *(row.name for row in stored or ())})
        recent = store.recent_runs(names, runs) if runs and names else {}
        counted = None
        if abandoned:
            every = sorted({*names, *(row.name for row in leases)})
            counted = store.abandoned_counts(every) if every else {}
        with_roles = [*(declared or ()), *(row.declared for row in stored or () if row.declared)]
        wanted = fleet and any(t.roles for t in with_roles)
        return Snapshot(
            leases=leases,
            runs=recent,
            db_now=db_now,
            clock=measured,
            abandoned=counted,
            runs_limit=runs,
            member_roles=_member_roles(store, namespace) if wanted else None,
            schedules=stored,
        )
    except StoreError as exc:
        empty = empty_without_tables and _no_tables(store)
        if empty:
            return Snapshot()
        return Snapshot(error=str(exc), answered=isinstance(exc, StatementError))


def _schedule_rows(store: LeaseStore, namespace: str | None) -> tuple[StoredTask, ...] | None:
    """The namespace's schedule rows judged by :meth:`Schedules.judged` (the one home of
    ``invalid``); None on a database without the schedule tables (an older one: a read
    creates none, §5.29)."""
    try:
        judged = Schedules(store=store, namespace=namespace).judged()
    except StatementError:  # answered: no such table (an outage fails the whole read)
        return None
    return tuple(
        StoredTask(
            name=row.full_name,
            task=row.name,
            job=row.job,
            schedule=str(task.schedule) if task is not None else _schedule_words(row),
            enabled=row.enabled,
            declared=None if task is None else DeclaredTask.of(task),
            invalid=row.invalid,
            offered=bool(row.offered_by),
        )
        for row, task in judged
    )


def _schedule_words(row: StoredSchedule) -> str:
    if row.cron is not None:
        return f"cron '{row.cron}' ({row.timezone or 'UTC'})"
    return f"every {row.every}"


def _member_roles(store: LeaseStore, namespace: str | None) -> tuple[frozenset[str], ...] | None:
    # a fleet of the version before roles has no such column until a new replica starts
    try:
        live = store.fleet.members().members
    except StoreError:
        return None
    return tuple(m.roles for m in live if m.namespace == (namespace or ""))


def _no_tables(store: LeaseStore) -> bool:
    try:
        return table_state(store.engine) in (TableState.NO_FILE, TableState.NONE)
    except SQLAlchemyError:
        return False
