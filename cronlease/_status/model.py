"""The status model: frozen values every surface formats, and nothing else.

A :class:`StatusReport` holds one :class:`TaskStatus` per task (each with its
recent :class:`RunStatus` rows) and the orphaned lease rows; its
:meth:`~StatusReport.health` is the one :class:`Health` value probes read.
Times are aware datetimes: recorded instants in UTC, next fire times in their
schedule's zone. Error text is already scrubbed of the database password.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Literal, get_args

from cronlease._lease.model import Outcome, RunRecord
from cronlease._status.rules import FAILURE_OUTCOMES, holder_id, summarize_error
from cronlease._timing.clock import ClockCheck
from cronlease._timing.schedule import time_of_slot

__all__ = [
    "RECENT_OUTCOMES",
    "Health",
    "RunStatus",
    "ShownState",
    "StatusReport",
    "TaskSource",
    "TaskState",
    "TaskStatus",
    "by_slot",
    "failing_problem",
    "invalid_problem",
]

TaskState = Literal["idle", "running", "paused"]
_STATES: frozenset[str] = frozenset(get_args(TaskState))
#: the one word a surface shows for a task, by precedence (:attr:`TaskStatus.shown_state`)
ShownState = Literal["paused", "invalid", "failing", "overdue", "running", "unoffered", "idle"]
#: where a declared task comes from: code or a config file, or a schedule row (§5.37)
TaskSource = Literal["code", "database"]
#: how many outcomes :attr:`TaskStatus.recent_outcomes` keeps (the page's strip)
RECENT_OUTCOMES = 20


def _check_utc(what: str, moment: datetime | None) -> None:
    if moment is not None and moment.utcoffset() != timedelta(0):
        raise ValueError(f"{what} must be an aware UTC datetime, got {moment!r}")


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)


@dataclass(frozen=True)
class RunStatus:
    """One row of run history. ``holder`` is the replica's id, without the attempt nonce.

    ``attempt`` counts the attempts at one slot (1, then 2, ... for a retry or a
    recovery), each its own row with its own fence and holder.
    """

    name: str
    slot: int
    manual: bool
    fence: int
    holder: str
    started_at: datetime
    finished_at: datetime | None
    duration: float | None
    outcome: Outcome
    error: str | None
    attempt: int = 1
    error_summary: str | None = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 1:
            raise ValueError(f"attempt counts from 1, got {self.attempt!r}")
        _check_utc("started_at", self.started_at)
        _check_utc("finished_at", self.finished_at)
        if (self.duration is None) != (self.finished_at is None):
            raise ValueError("a run has a duration exactly when it has finished")
        if self.duration is not None and self.duration < 0:
            raise ValueError(f"duration must not be negative, got {self.duration!r}")
        summary = summarize_error(self.error) if self.error else None
        object.__setattr__(self, "error_summary", summary)

    @classmethod
    def of(cls, record: RunRecord, scrub: Callable[[str], str] = str) -> RunStatus:
        return cls(
            name=record.name,
            slot=record.slot,
            manual=record.manual,
            fence=record.fence,
            holder=holder_id(record.holder),
            started_at=_utc(record.started_at),
            finished_at=None if record.finished_at is None else _utc(record.finished_at),
            duration=record.duration,
            outcome=record.outcome,
            error=None if record.error is None else scrub(record.error),
            attempt=record.attempt,
        )

    @property
    def scheduled_for(self) -> datetime:
        """The tick the run was for (a manual run's slot is the moment it was asked for)."""
        return time_of_slot(self.slot)


def by_slot(runs: Sequence[RunStatus]) -> tuple[RunStatus, ...]:
    """``runs`` (newest first) with the attempts of one slot next to each other.

    Attempts of a slot start one after another, before the next tick, so by
    start time they mostly already are; a run that started between two of them
    is moved after them. Otherwise the order is kept: the first run stays the newest.
    """
    groups: dict[tuple[int, bool], list[RunStatus]] = {}
    for run in runs:
        groups.setdefault((run.slot, run.manual), []).append(run)
    return tuple(run for group in groups.values() for run in group)


@dataclass(frozen=True)
class TaskStatus:
    """A task (or an orphaned lease row) as the fleet sees it now.

    ``state`` is ``paused`` (the fleet-wide flag), else ``running`` while a
    run holds the lease, else ``idle``; ``running`` says whether a run holds
    it, so a task paused during a run is both. ``holder`` is the replica whose
    run holds the lease now (None while none does: an idle task has no holder);
    ``last_holder`` and ``fence`` are those of the last acquisition (None for a
    row a pause created). ``runs``
    are the latest runs read, newest first. ``abandoned`` counts the task's
    runs recorded ``abandoned`` (their holder stopped renewing the lease), all
    its history long; None when it was not read.

    ``consecutive_failures`` counts the latest runs read, newest first, that did
    not succeed, up to the latest success (rules.failure_streak: ``failed``,
    ``timed_out``, ``lost`` and ``abandoned`` count, manual runs and every attempt
    too; ``running``, ``interrupted`` and ``missed`` neither count nor end it).
    ``streak_capped`` says no success was among the runs read though more exist
    (as many were read as asked): the streak is then *at least* that long.
    ``alert_after`` is the declared threshold (None for an orphaned row);
    ``failing`` is True for a declared, enabled task whose streak reached it.
    ``skipped`` counts this task's ticks skipped, by reason (``overlap``,
    ``capacity``, ``taken``, ...), **as the replica that built the report counted
    them since it started** — other replicas' skips are not in it, and it is
    empty when no replica built the report (the CLI). ``no_live_replica``: the
    task has roles and no live replica (member row) has any of them.

    ``source`` is ``database`` for a schedule row (docs/design.md §5.37), declared like a
    code task from the row's schedule and options; ``job`` is the job it runs,
    ``invalid`` why no replica runs the row (its schedule is then the row's text, it has
    no next fire time and is never overdue), ``unoffered`` that it is valid and enabled
    but no live replica offers its job (:attr:`StoredTask.unoffered
    <cronlease._status.rules.StoredTask.unoffered>`).
    """

    name: str
    task: str
    declared: bool
    enabled: bool | None
    schedule: str | None
    state: TaskState
    running: bool
    holder: str | None
    fence: int | None
    last_slot: int | None
    lease_expires_at: datetime | None
    lease_expires_in: float | None
    next_fire: datetime | None
    overdue: bool
    runs: tuple[RunStatus, ...] = ()
    abandoned: int | None = None
    consecutive_failures: int = 0
    streak_capped: bool = False
    alert_after: int | None = None
    #: the replica roles that may run it (none: any replica)
    roles: tuple[str, ...] = ()
    #: True when the live member rows were read and none has one of ``roles``: no
    #: replica runs this task now (False when it has no roles or they were not read)
    no_live_replica: bool = False
    #: the replica of the last acquisition, running or not (default: ``holder``)
    last_holder: str | None = None
    source: TaskSource = "code"
    job: str | None = None
    invalid: str | None = None
    unoffered: bool = False
    # (compare=False: a mapping would make the frozen value unhashable)
    skipped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    failing: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.no_live_replica and not (self.roles and self.declared):
            raise ValueError("only a declared task with roles can lack a replica to run it")
        if (self.source == "database") != (self.job is not None) or (
            self.source == "database" and not self.declared
        ):
            raise ValueError("a schedule row is a declared task with a job, and only it")
        if self.invalid is not None and (self.unoffered or self.next_fire or self.overdue):
            raise ValueError("an invalid schedule row is not run: not offered, due or overdue")
        if (self.invalid is not None or self.unoffered) and self.source != "database":
            raise ValueError("only a schedule row is invalid or not offered")
        if self.abandoned is not None and self.abandoned < 0:
            raise ValueError(f"abandoned counts runs, got {self.abandoned!r}")
        if self.consecutive_failures < 0:
            raise ValueError(f"consecutive_failures counts runs, got {self.consecutive_failures}")
        if self.streak_capped and not self.consecutive_failures:
            raise ValueError("only a streak of failures can be longer than the runs read")
        if (self.alert_after is None) == self.declared:
            raise ValueError("a declared task, and only one, has an alert_after")
        if self.alert_after is not None and self.alert_after < 1:
            raise ValueError(f"alert_after counts from 1, got {self.alert_after!r}")
        if any(count < 0 for count in self.skipped.values()):
            raise ValueError(f"skipped counts ticks, got {dict(self.skipped)!r}")
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))
        failing = (
            self.alert_after is not None
            and bool(self.enabled)
            and self.consecutive_failures >= self.alert_after
        )
        object.__setattr__(self, "failing", failing)
        if self.state not in _STATES:
            raise ValueError(f"state must be one of {sorted(_STATES)}, got {self.state!r}")
        if not self.declared == (self.schedule is not None) == (self.enabled is not None):
            raise ValueError("a declared task, and only one, has a schedule and an enabled flag")
        if self.last_holder is None:
            object.__setattr__(self, "last_holder", self.holder)
        if (self.last_holder is None) != (self.fence is None):
            raise ValueError("a lease row has a last holder exactly when it has a fence")
        if (self.holder is not None) != self.running:
            raise ValueError("a task has a holder exactly while a run holds its lease")
        if self.holder is not None and self.holder != self.last_holder:
            raise ValueError("the holder of a running task is its last holder")
        if (self.state == "running") != (self.running and self.state != "paused"):
            raise ValueError(f"state {self.state!r} contradicts running={self.running}")
        if self.next_fire is not None and (
            not self.enabled or self.state == "paused" or self.next_fire.tzinfo is None
        ):
            raise ValueError("only an enabled, unpaused task has a next fire time, and it is aware")
        if self.overdue and not (self.enabled and self.state == "idle"):
            raise ValueError("only an enabled, idle task can be overdue")
        _check_utc("lease_expires_at", self.lease_expires_at)
        if any(run.name != self.name for run in self.runs):
            raise ValueError(f"runs of another task in the status of {self.name!r}")

    @property
    def paused(self) -> bool:
        return self.state == "paused"

    @property
    def shown_state(self) -> ShownState:
        """One word for a glance, by precedence: ``paused`` (someone chose that; pausing a
        failing task silences its alert until it is resumed), ``invalid`` (a schedule row
        no replica runs), ``failing`` (even while a new run is going: the last ones
        failed), ``overdue``, ``running``, ``unoffered`` (a schedule row whose job no live
        replica offers), ``idle``."""
        if self.paused:
            return "paused"
        if self.invalid is not None:
            return "invalid"
        if self.failing:
            return "failing"
        if self.overdue:
            return "overdue"
        if self.running:
            return "running"
        return "unoffered" if self.unoffered else "idle"

    @property
    def recent_outcomes(self) -> tuple[Outcome, ...]:
        """The outcomes of the latest runs read (at most RECENT_OUTCOMES), newest first."""
        return tuple(run.outcome for run in self.runs[:RECENT_OUTCOMES])

    @property
    def failure_text(self) -> str:
        """The streak for people: "3 runs in a row", "at least 20 runs in a row"."""
        count = self.consecutive_failures
        runs = "run" if count == 1 else "runs"
        return f"{'at least ' if self.streak_capped else ''}{count} {runs} in a row"

    @property
    def last_failure(self) -> RunStatus | None:
        """The latest run read that counts as a failure (None if none of them does)."""
        return next((run for run in self.runs if run.outcome in FAILURE_OUTCOMES), None)

    @property
    def last_slot_time(self) -> datetime | None:
        return None if self.last_slot is None else time_of_slot(self.last_slot)

    @property
    def last_run(self) -> RunStatus | None:
        return self.runs[0] if self.runs else None

    @property
    def last_success(self) -> RunStatus | None:
        """The latest succeeded run among those read (None if none of them succeeded)."""
        return next((run for run in self.runs if run.outcome == "succeeded"), None)

    @property
    def error_summary(self) -> str | None:
        """The summary of the last run's error, if it had one."""
        last = self.last_run
        return None if last is None else last.error_summary


@dataclass(frozen=True)
class Health:
    """What a probe fails on; ``ok`` is False exactly when a problem is listed."""

    ok: bool
    problems: tuple[str, ...]
    overdue: tuple[str, ...] = ()
    database_down_for: float | None = None
    failing: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ok != (not self.problems):
            raise ValueError("health is ok exactly when it lists no problem")


@dataclass(frozen=True)
class StatusReport:
    """Everything the surfaces show, read at one moment (``generated_at``, this host's clock).

    ``database_error`` says why the store could not be read (then no lease
    row is known and ``database_time`` is None); ``database_answered`` that the
    database answered the read with an error about the statement (docs/design.md
    §5.19: not an outage, and not to be called one); ``orphaned`` holds the lease
    rows of the namespace that no declared task owns.
    """

    generated_at: datetime
    database: str
    namespace: str | None
    database_time: datetime | None
    database_error: str | None
    clock: ClockCheck | None
    tasks: tuple[TaskStatus, ...]
    orphaned: tuple[TaskStatus, ...] = ()
    database_answered: bool = False

    def __post_init__(self) -> None:
        if self.database_answered and self.database_error is None:
            raise ValueError("only a read that failed was answered with an error")
        _check_utc("generated_at", self.generated_at)
        _check_utc("database_time", self.database_time)
        if self.database_error is not None and self.database_time is not None:
            raise ValueError("a report whose database could not be read has no database time")
        if any(task.declared for task in self.orphaned):
            raise ValueError("an orphaned lease row is one no declared task owns")
        names = [task.name for task in (*self.tasks, *self.orphaned)]
        if len(names) != len(set(names)):
            raise ValueError("a task appears twice in the report")

    @property
    def overdue(self) -> tuple[str, ...]:
        return tuple(task.name for task in self.tasks if task.overdue)

    @property
    def failing(self) -> tuple[str, ...]:
        """The tasks shown ``failing``: failing and not paused (a pause silences it)."""
        return tuple(task.name for task in self.tasks if task.shown_state == "failing")

    @property
    def invalid(self) -> tuple[str, ...]:
        """The enabled schedule rows shown ``invalid``: no replica runs them (a pause or
        disabling the row silences it, as for a failing task)."""
        return tuple(
            task.name for task in self.tasks if task.shown_state == "invalid" and task.enabled
        )

    def health(
        self,
        *,
        database_down_for: float | None = None,
        database_threshold: float = 60.0,
        replica: Sequence[str] = (),
    ) -> Health:
        """Problems: those the replica knows of itself (``replica``: a stalled timer, a
        replaced SQLite file), the database unreachable for longer than
        ``database_threshold`` seconds (``database_down_for``: as this replica saw it),
        unreadable now, a task failing ("NAME is failing (3 runs in a row, last: ...)")
        or overdue, an enabled schedule row invalid ("NAME is invalid: why"). A row whose
        job no live replica offers is not a problem of its own: like a code task no
        replica runs, it is one once a tick of it is overdue. A read failing inside a
        short outage is not yet a problem."""
        problems: list[str] = list(replica)
        outage = database_down_for is not None and database_down_for > database_threshold
        if outage:
            problems.append(f"database unreachable for {database_down_for:.0f} s")
        if self.database_error is not None and self.database_answered:
            problems.append(f"the database refuses the status read: {self.database_error}")
        elif self.database_error is not None and (database_down_for is None or outage):
            problems.append(f"database unreachable: {self.database_error}")
        invalid = self.invalid
        for task in self.tasks:
            if task.shown_state == "failing":
                problems.append(failing_problem(task))
            elif task.name in invalid:
                problems.append(invalid_problem(task))
        problems.extend(f"{name} is overdue" for name in self.overdue)
        return Health(
            ok=not problems,
            problems=tuple(problems),
            overdue=self.overdue,
            database_down_for=database_down_for,
            failing=self.failing,
            invalid=invalid,
        )


def failing_problem(task: TaskStatus) -> str:
    """The problem a failing task is in :meth:`StatusReport.health`, one line."""
    last = task.last_failure
    said = None if last is None else (last.error_summary or last.outcome)
    return f"{task.name} is failing ({task.failure_text}, last: {said})"


def invalid_problem(task: TaskStatus) -> str:
    """The problem an invalid schedule row is in :meth:`StatusReport.health`, one line."""
    return f"{task.name} is invalid: {task.invalid}"
