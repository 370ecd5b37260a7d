"""The status model on its own, no database: the rules every surface shows alike."""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from cronlease._lease.model import LeaseInfo, RunRecord
from cronlease._status import (
    DeclaredTask,
    Health,
    RunStatus,
    Scrubber,
    Snapshot,
    StatusReport,
    StoredTask,
    TaskStatus,
    build_report,
    format_duration,
    format_time,
    holder_id,
    in_namespace,
    lease_text,
    report_json,
    run_json,
    summarize_error,
)
from cronlease._timing.schedule import Schedule, slot_of

NOW = datetime(2025, 3, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)
TICK = datetime(2025, 3, 1, 11, 59, 50, tzinfo=timezone.utc)  # the last 10 s tick before NOW
DB_NOW = NOW.timestamp()  # the database clock agrees with this host's here
EVERY_10S = Schedule.every("10s")
NO_SCRUBBING = Scrubber(None)


def lease(
    name: str,
    *,
    slot: datetime | None = None,
    expires_in: float | None = None,
    fence: int = 3,
    paused: bool = False,
    holder: str = "web-1:42:abc123#00ff00ff00ff00ff",
) -> LeaseInfo:
    """A lease row; unless ``expires_in`` says otherwise, its run released the lease a
    second after its slot (5 s ago when it has none)."""
    if expires_in is not None:
        expires_at = DB_NOW + expires_in
    elif slot is not None:
        expires_at = slot.timestamp() + 1.0
    else:
        expires_at = DB_NOW - 5.0
    return LeaseInfo(
        name=name,
        holder=holder,
        fence=fence,
        slot=-1 if slot is None else slot_of(slot),
        acquired_at=DB_NOW - 10,
        expires_at=expires_at,
        paused=paused,
        fingerprint=None,
    )


def record(
    name: str,
    outcome: str = "succeeded",
    error: str | None = None,
    *,
    attempt: int = 1,
    slot: datetime | None = None,
    started: float = DB_NOW - 12.5,
) -> RunRecord:
    return RunRecord(
        name=name,
        slot=slot_of(NOW - timedelta(seconds=12.5) if slot is None else slot),
        manual=False,
        attempt=attempt,
        fence=2 + attempt,
        holder="web-1:42:abc123#00ff00ff00ff00ff",
        scheduled_for=started,
        started_at=started,
        finished_at=None if outcome == "running" else started + 1.25,
        outcome=outcome,
        error=error,
    )


def report(
    rows: Sequence[LeaseInfo],
    declared: Sequence[DeclaredTask] | None,
    *,
    runs: dict[str, list[RunRecord]] | None = None,
    abandoned: dict[str, int] | None = None,
    namespace: str | None = None,
    internal: Sequence[str] = (),
    since: datetime | None = None,
    scrub: Scrubber = NO_SCRUBBING,
    now: datetime = NOW,
) -> StatusReport:
    snapshot = Snapshot(leases=tuple(rows), runs=runs or {}, db_now=DB_NOW, abandoned=abandoned)
    return build_report(
        snapshot,
        declared,
        database="sqlite:///x.db",
        now=now,
        namespace=namespace,
        internal=internal,
        since=since,
        scrub=scrub,
    )


def one(rows: Sequence[LeaseInfo], task: DeclaredTask, **options: object) -> TaskStatus:
    (status,) = report(rows, [task], **options).tasks  # type: ignore[arg-type]
    return status


def failure(exc: BaseException) -> str:
    """An error as the runner records it: the formatted exception, stripped."""
    try:
        raise exc
    except BaseException as raised:
        return "".join(traceback.format_exception(raised)).strip()


class CommandError(Exception):
    """Stands for the shell task's error (a module path on its type, like the real one)."""


def captured(exc: Exception) -> Exception:
    """``exc`` with a traceback of its own, as a task group's sub-exceptions have."""
    try:
        raise exc
    except Exception as raised:
        return raised


def nested() -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        raise RuntimeError("could not load the report\nsee the runbook") from exc


# --- the error summary --------------------------------------------------------------


def test_a_traceback_is_summarized_as_its_exception_line() -> None:
    error = failure(ValueError("bad input <b>"))
    assert error.startswith("Traceback") and "File" in error
    assert summarize_error(error) == "ValueError: bad input <b>"


def test_a_chained_traceback_shows_the_last_exception_raised() -> None:
    try:
        nested()
    except RuntimeError as exc:
        error = "".join(traceback.format_exception(exc)).strip()
    assert "KeyError" in error and "direct cause" in error
    assert summarize_error(error) == "RuntimeError: could not load the report ... see the runbook"


def test_what_cronlease_said_before_a_traceback_is_kept() -> None:
    error = "lease lost during the run; the task failed: " + failure(ValueError("boom"))
    assert summarize_error(error) == "lease lost during the run; the task failed: ValueError: boom"


def test_a_command_error_keeps_its_status_line_and_its_last_stderr_line() -> None:
    head = "command 'sync' exited with status 2 after 0.3 s; last lines of stderr:"
    stderr = "connecting\nretrying\nno route to host"
    # as recorded: the CommandError's traceback, its message holding the stderr tail
    recorded = failure(CommandError(f"{head}\n{stderr}"))
    assert f"{CommandError.__module__}.CommandError: command" in recorded
    assert summarize_error(recorded) == f"CommandError: {head} ... no route to host"
    assert summarize_error(f"{head}\n{stderr}") == f"{head} ... no route to host"
    # a Python command's own traceback, in its stderr tail
    python = f"{head}\n{failure(OSError('disk full'))}"
    assert summarize_error(python) == f"{head} OSError: disk full"


def test_a_one_line_error_is_its_own_summary() -> None:
    timeout = "command 'sleep 60' was killed after its timeout of 1 s"
    assert summarize_error(f"  {timeout}\n") == timeout


def test_a_truncated_error_drops_its_first_fragment() -> None:
    error = failure(ValueError("late"))
    cut_in_a_frame = "..." + error[error.index("File") + 3 :]
    assert summarize_error(cut_in_a_frame) == "ValueError: late"
    cut_in_stderr = "...ting\nretrying\nno route to host"
    assert summarize_error(cut_in_stderr) == "retrying ... no route to host"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception groups are Python 3.11+")
def test_an_exception_group_shows_itself_and_its_last_sub_exception() -> None:
    group = BaseExceptionGroup("two failures", [ValueError("a"), TypeError("b")])  # noqa: F821
    summary = "ExceptionGroup: two failures (2 sub-exceptions) ... TypeError: b"
    assert summarize_error(failure(group)) == summary
    raised = BaseExceptionGroup(  # noqa: F821
        "from a task group", [captured(ValueError("a")), captured(TypeError("b"))]
    )
    assert summarize_error(failure(raised)) == "TypeError: b"
    lost = "lease lost during the run; the task failed: " + failure(group)
    assert summarize_error(lost) == f"lease lost during the run; the task failed: {summary}"


# --- times, durations, holders -------------------------------------------------------


def test_times_are_iso_8601_to_the_millisecond_with_z_for_utc() -> None:
    assert format_time(NOW) == "2025-03-01T12:00:00.250Z"
    assert format_time(datetime(2025, 1, 1, tzinfo=ZoneInfo("Europe/London"))) == (
        "2025-01-01T00:00:00.000Z"  # a zero offset is UTC, whatever the zone's name
    )
    istanbul = datetime(2025, 3, 1, 2, 0, tzinfo=ZoneInfo("Europe/Istanbul"))
    assert format_time(istanbul) == "2025-03-01T02:00:00.000+03:00"
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2025, 1, 1))


def test_durations_and_leases_read_the_same_everywhere() -> None:
    assert [format_duration(s) for s in (0.25, 1.5, 42, 90, 3600, 7500)] == [
        "250ms",
        "1.5s",
        "42s",
        "1m30s",
        "1h00m",
        "2h05m",
    ]
    assert lease_text(None) == "-"
    assert lease_text(4.2) == "expires in 4.2s"
    assert lease_text(0) == lease_text(-3) == "free"


def test_a_holder_is_shown_without_its_attempt_nonce() -> None:
    assert holder_id("web-1:42:abc123#00ff00ff00ff00ff") == "web-1:42:abc123"
    assert holder_id("web-1:42:abc123") == "web-1:42:abc123"


def test_run_times_are_utc_and_its_error_is_summarized_and_scrubbed() -> None:
    error = failure(ConnectionError("postgresql://app:hunter22@db/x refused"))
    run = RunStatus.of(record("t", "failed", error), Scrubber("hunter22"))
    assert run.holder == "web-1:42:abc123"
    assert run.started_at == NOW - timedelta(seconds=12.5)
    assert run.duration == pytest.approx(1.25)
    assert run.error is not None and "hunter22" not in run.error
    assert run.error_summary == "ConnectionError: postgresql://app:***@db/x refused"
    assert Scrubber("abc")("abc def") == "abc def"  # too short to replace safely


# --- attempts and abandoned runs -----------------------------------------------------


def test_each_run_shows_its_attempt_and_the_attempts_of_a_slot_read_together() -> None:
    earlier = TICK - timedelta(seconds=10)
    rows = [
        record("t", attempt=2, slot=earlier, started=DB_NOW - 14),
        # started between the slot's two attempts, by its start time
        record("t", attempt=1, slot=TICK, started=DB_NOW - 15),
        record("t", "failed", attempt=1, slot=earlier, started=DB_NOW - 16),
    ]
    status = one([], DeclaredTask(name="t", schedule=EVERY_10S), runs={"t": rows})
    assert [(run.slot, run.attempt) for run in status.runs] == [
        (slot_of(earlier), 2),
        (slot_of(earlier), 1),
        (slot_of(TICK), 1),
    ]
    assert status.last_run is status.runs[0]  # the newest run stays first
    assert run_json(status.runs[0])["attempt"] == 2
    with pytest.raises(ValueError, match="attempt"):
        RunStatus.of(record("t", attempt=0))


def test_abandoned_runs_are_counted_per_task_orphans_included_when_read() -> None:
    declared = [
        DeclaredTask(name="app:t", schedule=EVERY_10S, task="t"),
        DeclaredTask(name="app:u", schedule=EVERY_10S, task="u"),
    ]
    rows = [lease("app:t"), lease("app:gone")]
    counted = report(rows, declared, abandoned={"app:t": 3, "app:gone": 1}, namespace="app")
    assert [(t.name, t.abandoned) for t in counted.tasks] == [("app:t", 3), ("app:u", 0)]
    assert [(t.name, t.abandoned) for t in counted.orphaned] == [("app:gone", 1)]
    data = report_json(counted)
    assert [t["abandoned"] for t in data["tasks"]] == [3, 0]
    assert data["orphaned"][0]["abandoned"] == 1
    # not read (a probe's health()): unknown, not zero
    unread = report(rows, declared, namespace="app")
    assert [t.abandoned for t in (*unread.tasks, *unread.orphaned)] == [None, None, None]
    with pytest.raises(ValueError, match="failed read"):
        Snapshot(abandoned={}, error="down")


# --- state ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "state", "running", "last_holder"),
    [
        (None, "idle", False, None),
        (lease("t", expires_in=5), "running", True, "web-1:42:abc123"),
        (lease("t", expires_in=-5), "idle", False, "web-1:42:abc123"),
        (lease("t", paused=True), "paused", False, "web-1:42:abc123"),
        (lease("t", paused=True, expires_in=5), "paused", True, "web-1:42:abc123"),
        (lease("t", paused=True, fence=0, holder=""), "paused", False, None),
    ],
    ids=["no-row", "held", "expired", "paused", "paused-during-a-run", "row-made-by-pause"],
)
def test_state_is_derived_from_the_lease_row_on_the_database_clock(
    row: LeaseInfo | None, state: str, running: bool, last_holder: str | None
) -> None:
    status = one([row] if row else [], DeclaredTask(name="t", schedule=EVERY_10S))
    assert (status.state, status.running, status.last_holder) == (state, running, last_holder)
    # a holder only while a run holds the lease: a finished or expired one's is history
    assert status.holder == (last_holder if running else None)
    assert status.paused == (state == "paused")
    assert (status.fence is None) == (last_holder is None)
    assert (status.lease_expires_in is None) == (last_holder is None)


def test_a_task_shows_its_schedule_next_fire_time_and_runs() -> None:
    row = lease("ns:t", slot=TICK, expires_in=4.2)
    runs = {"ns:t": [record("ns:t", "failed", failure(ValueError("x"))), record("ns:t")]}
    declared = DeclaredTask(name="ns:t", schedule=EVERY_10S, task="t")
    status = one([row], declared, runs=runs, namespace="ns")
    assert (status.task, status.schedule, status.declared, status.enabled) == (
        "t",
        "every 10s",
        True,
        True,
    )
    assert status.next_fire == datetime(2025, 3, 1, 12, 0, 10, tzinfo=timezone.utc)
    assert status.lease_expires_in == 4.2
    assert status.last_slot_time == TICK
    assert status.last_run is not None and status.last_run.outcome == "failed"
    assert status.error_summary == "ValueError: x"
    assert status.last_success is status.runs[1]


def test_a_cron_tasks_next_fire_time_is_in_its_own_zone() -> None:
    cron = Schedule.cron("0 2 * * *", timezone="Europe/Istanbul")
    status = one([], DeclaredTask(name="report", schedule=cron))
    assert status.next_fire is not None
    assert format_time(status.next_fire) == "2025-03-02T02:00:00.000+03:00"


def test_a_disabled_task_has_no_next_fire_time_and_is_never_overdue() -> None:
    row = lease("t", slot=NOW - timedelta(minutes=5))
    status = one([row], DeclaredTask(name="t", schedule=EVERY_10S, enabled=False))
    assert status.enabled is False and status.next_fire is None and not status.overdue


# --- overdue ------------------------------------------------------------------------


def test_a_task_is_overdue_once_its_next_tick_is_later_than_its_grace() -> None:
    task = DeclaredTask(name="t", schedule=EVERY_10S)  # grace: half the gap, 5 s
    assert one([lease("t", slot=NOW - timedelta(seconds=60))], task).overdue
    assert not one([lease("t", slot=NOW - timedelta(seconds=14))], task).overdue  # 4 s late
    assert one(
        [lease("t", slot=NOW - timedelta(seconds=14))],
        DeclaredTask(name="t", schedule=EVERY_10S, grace=1.0),
    ).overdue


def test_overdue_is_judged_on_the_database_clock_not_this_host_s() -> None:
    # Issue 12: a lone replica whose wall clock stepped back an hour ran nothing, and
    # health() said ok: by its own clock the next tick was still an hour away.
    task = DeclaredTask(name="t", schedule=EVERY_10S)
    behind, ahead = NOW - timedelta(hours=1), NOW + timedelta(hours=1)
    assert one([lease("t", slot=NOW - timedelta(seconds=60))], task, now=behind).overdue
    assert not one([lease("t", slot=NOW - timedelta(seconds=2))], task, now=ahead).overdue


def test_paused_held_and_never_run_tasks_are_not_overdue() -> None:
    task = DeclaredTask(name="t", schedule=EVERY_10S)
    long_ago = NOW - timedelta(minutes=5)
    assert not one([lease("t", slot=long_ago, paused=True)], task).overdue
    assert not one([lease("t", slot=long_ago, expires_in=30)], task).overdue
    assert not one([], task).overdue  # no cursor: nothing was due yet
    # ... unless the asker knows when ticks became due (a replica's start)
    assert one([], task, since=NOW - timedelta(minutes=1)).overdue


def test_the_report_lists_overdue_tasks_and_health_fails_on_them() -> None:
    late = lease("late", slot=NOW - timedelta(minutes=5))
    fine = lease("fine", slot=NOW - timedelta(seconds=2))
    built = report(
        [late, fine],
        [DeclaredTask(name=n, schedule=EVERY_10S) for n in ("late", "fine")],
    )
    assert built.overdue == ("late",)
    assert built.health() == Health(ok=False, problems=("late is overdue",), overdue=("late",))


# --- orphans and namespaces -----------------------------------------------------------


def test_namespace_filter() -> None:
    assert in_namespace("app:sync", "app")
    assert not in_namespace("application:sync", "app")
    assert not in_namespace("sync", "app")
    assert in_namespace("sync", None)
    assert not in_namespace("app:sync", None)


def test_orphans_are_undeclared_rows_of_the_namespace_but_not_internal_tasks() -> None:
    rows = [
        lease("app:kept"),
        lease("app:gone"),
        lease("app:cronlease-housekeeping"),
        lease("billing:gone"),
        lease("bare"),
    ]
    declared = [DeclaredTask(name="app:kept", schedule=EVERY_10S, task="kept")]
    built = report(rows, declared, namespace="app", internal=("cronlease-housekeeping",))
    assert [t.name for t in built.tasks] == ["app:kept"]
    assert [t.name for t in built.orphaned] == ["app:gone"]
    (orphan,) = built.orphaned
    assert not orphan.declared and orphan.schedule is None and orphan.enabled is None
    without_namespace = report(rows, [DeclaredTask(name="x", schedule=EVERY_10S)])
    assert [t.name for t in without_namespace.orphaned] == ["bare"]


def test_without_declared_tasks_every_row_is_a_task_sorted_by_name() -> None:
    built = report([lease("b"), lease("a:x"), lease("c")], None)
    assert [t.name for t in built.tasks] == ["a:x", "b", "c"]
    assert built.orphaned == () and built.overdue == ()


def test_declared_tasks_are_sorted_by_name() -> None:
    declared = [DeclaredTask(name=n, schedule=EVERY_10S) for n in ("zeta", "alpha", "mid")]
    assert [t.name for t in report([], declared).tasks] == ["alpha", "mid", "zeta"]


# --- the database, unreadable ------------------------------------------------------------


def test_a_failed_read_is_reported_scrubbed_and_fails_health_outside_a_short_outage() -> None:
    built = build_report(
        Snapshot(error="could not connect to postgresql://app:hunter22@db/x"),
        [DeclaredTask(name="t", schedule=EVERY_10S)],
        database="postgresql://app:***@db/x",
        now=NOW,
        scrub=Scrubber("hunter22"),
    )
    assert built.database_error == "could not connect to postgresql://app:***@db/x"
    assert built.database_time is None
    (task,) = built.tasks
    assert task.state == "idle" and not task.overdue and task.next_fire is not None
    probe = built.health()
    assert not probe.ok
    assert probe.problems == (
        "database unreachable: could not connect to postgresql://app:***@db/x",
    )
    assert built.health(database_down_for=5.0).ok  # a blip this replica already rides out
    long = built.health(database_down_for=120.0)
    assert long.problems[0] == "database unreachable for 120 s" and len(long.problems) == 2


# --- the values check themselves ---------------------------------------------------------


def test_contradictory_values_are_refused() -> None:
    good = one([lease("t", expires_in=5)], DeclaredTask(name="t", schedule=EVERY_10S))
    fields = {f.name: getattr(good, f.name) for f in dataclasses.fields(TaskStatus) if f.init}
    with pytest.raises(ValueError, match="state"):
        TaskStatus(**{**fields, "state": "idle"})  # a run holds the lease
    with pytest.raises(ValueError, match="holder"):
        TaskStatus(**{**fields, "holder": None})
    with pytest.raises(ValueError, match="overdue"):
        TaskStatus(**{**fields, "overdue": True})
    with pytest.raises(ValueError, match="ok"):
        Health(ok=True, problems=("x is overdue",))
    with pytest.raises(ValueError, match="failed read"):
        Snapshot(db_now=DB_NOW, error="down")
    with pytest.raises(ValueError, match="twice"):
        StatusReport(
            generated_at=NOW,
            database="d",
            namespace=None,
            database_time=None,
            database_error=None,
            clock=None,
            tasks=(good, good),
        )
    with pytest.raises(ValueError, match="UTC"):
        RunStatus(
            name="t",
            slot=0,
            manual=False,
            fence=1,
            holder="h",
            started_at=datetime(2025, 1, 1, tzinfo=ZoneInfo("Europe/Istanbul")),
            finished_at=None,
            duration=None,
            outcome="running",
            error=None,
        )


# --- JSON: one shape for the CLI and the page ---------------------------------------------


def test_json_writes_every_time_the_same_way() -> None:
    row = lease("app:t", slot=TICK, expires_in=4.2)
    built = report(
        [row, lease("app:old")],
        [DeclaredTask(name="app:t", schedule=EVERY_10S, task="t")],
        runs={"app:t": [record("app:t")]},
        namespace="app",
    )
    data = report_json(built)
    (task,) = data["tasks"]
    (orphan,) = data["orphaned"]
    assert set(task) == set(orphan)  # tasks and orphans: one shape
    assert data["generated_at"] == "2025-03-01T12:00:00.250Z"
    assert data["database_time"] == "2025-03-01T12:00:00.250Z"
    assert task["last_slot_time"] == "2025-03-01T11:59:50.000Z"
    assert task["lease_expires_at"] == "2025-03-01T12:00:04.450Z"
    assert task["next_fire_time"] == "2025-03-01T12:00:10.000Z"
    assert task["holder"] == "web-1:42:abc123" and task["state"] == "running"
    # an expired lease has no holder, only the last one
    assert orphan["holder"] is None and orphan["last_holder"] == "web-1:42:abc123"
    run = task["last_run"]
    assert run == task["runs"][0]
    assert run["started_at"] == "2025-03-01T11:59:47.750Z"
    assert run["finished_at"] == "2025-03-01T11:59:49.000Z"
    assert run["duration"] == 1.25 and task["last_success_at"] == run["finished_at"]
    assert run["attempt"] == 1 and task["abandoned"] is None
    assert data["overdue"] == [] and data["clock_skew"] is None


# --- schedule rows (docs/design.md §5.37) -------------------------------------------------


def stored(
    name: str,
    *,
    invalid: str | None = None,
    offered: bool = True,
    enabled: bool = True,
    alert_after: int = 1,
) -> StoredTask:
    task = DeclaredTask(name=name, schedule=EVERY_10S, enabled=enabled, alert_after=alert_after)
    return StoredTask(
        name=name,
        task=name.split(":")[-1],
        job="export",
        schedule="every 10s",
        enabled=enabled,
        declared=None if invalid else task,
        invalid=invalid,
        offered=offered,
    )


def rows_report(
    leases: Sequence[LeaseInfo],
    declared: Sequence[DeclaredTask] | None,
    rows: Sequence[StoredTask],
    runs: dict[str, list[RunRecord]] | None = None,
) -> StatusReport:
    snapshot = Snapshot(leases=tuple(leases), runs=runs or {}, db_now=DB_NOW, schedules=tuple(rows))
    return build_report(snapshot, declared, database="sqlite:///x.db", now=NOW, namespace="app")


def test_a_schedule_row_is_a_declared_task_judged_as_a_code_task_is() -> None:
    built = rows_report(
        [lease("app:row", slot=NOW - timedelta(minutes=5)), lease("app:gone")],
        [DeclaredTask(name="app:coded", schedule=EVERY_10S)],
        [stored("app:row")],
    )
    assert [t.name for t in built.tasks] == ["app:coded", "app:row"]
    assert [t.name for t in built.orphaned] == ["app:gone"]
    row = built.tasks[1]
    assert (row.declared, row.source, row.job, row.task) == (True, "database", "export", "row")
    assert row.overdue and row.shown_state == "overdue" and row.next_fire is not None
    assert built.health().problems == ("app:row is overdue",)


def test_an_invalid_row_shows_its_reason_and_is_a_problem_unless_disabled_or_paused() -> None:
    built = rows_report(
        [lease("app:held", expires_in=30), lease("app:paused", paused=True)],
        [],
        [
            stored("app:bad", invalid="its JSON cannot be read"),
            stored("app:off", invalid="bad", enabled=False),
            stored("app:paused", invalid="bad"),
            stored("app:held", invalid="bad"),
        ],
        runs={"app:bad": [record("app:bad", "failed", "boom")]},
    )
    shown = {t.task: t for t in built.tasks}
    bad = shown["bad"]
    assert (bad.shown_state, bad.invalid, bad.schedule) == (
        "invalid",
        "its JSON cannot be read",
        "every 10s",
    )
    assert (bad.next_fire, bad.overdue, bad.alert_after, bad.failing) == (None, False, 1, True)
    assert shown["held"].shown_state == "invalid"  # even while an old run holds the lease
    assert shown["paused"].shown_state == "paused"
    assert shown["off"].shown_state == "invalid"
    assert built.invalid == ("app:bad", "app:held")
    assert built.failing == ()  # shown invalid: one problem, the reason
    health = built.health()
    assert health.problems == (
        "app:bad is invalid: its JSON cannot be read",
        "app:held is invalid: bad",
    )
    assert health.invalid == built.invalid and not health.ok


def test_a_row_no_live_replica_offers_is_unoffered_below_running_and_overdue() -> None:
    built = rows_report(
        [lease("app:busy", expires_in=30), lease("app:late", slot=NOW - timedelta(minutes=5))],
        None,
        [
            stored("app:idle", offered=False),
            stored("app:busy", offered=False),
            stored("app:late", offered=False),
            stored("app:off", offered=False, enabled=False),
        ],
    )
    shown = {t.task: t for t in built.tasks}
    assert {name: t.shown_state for name, t in shown.items()} == {
        "idle": "unoffered",
        "busy": "running",
        "late": "overdue",
        "off": "idle",
    }
    assert (shown["idle"].unoffered, shown["off"].unoffered) == (True, False)
    assert built.health().problems == ("app:late is overdue",)


def test_a_code_tasks_name_wins_over_a_row_of_the_same_name() -> None:
    built = rows_report([], [DeclaredTask(name="app:x", schedule=EVERY_10S)], [stored("app:x")])
    assert [(t.name, t.source) for t in built.tasks] == [("app:x", "code")]


def test_only_a_schedule_row_is_invalid_or_unoffered() -> None:
    base = report([], [DeclaredTask(name="t", schedule=EVERY_10S)]).tasks[0]
    with pytest.raises(ValueError, match="only a schedule row"):
        dataclasses.replace(base, unoffered=True)
    with pytest.raises(ValueError, match="schedule row is a declared task with a job"):
        dataclasses.replace(base, source="database")
    with pytest.raises(ValueError, match="invalid exactly when"):
        StoredTask(name="x", task="x", job="j", schedule="every 1s", enabled=True, declared=None)
