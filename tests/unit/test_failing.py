"""Failure alerting in the status model, no database: streaks, ``failing``, shown state, health."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cronlease import ConfigError, Scheduler
from cronlease._lease.model import LeaseInfo, Outcome, RunRecord
from cronlease._status import (
    RECENT_OUTCOMES,
    DeclaredTask,
    Snapshot,
    StatusReport,
    TaskStatus,
    build_report,
    failure_streak,
    health_json,
    report_json,
    streak_runs,
)
from cronlease._task import Task
from cronlease._timing.schedule import Schedule, slot_of
from cronlease.config import load_config
from cronlease.errors import ConfigFileError

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
DB_NOW = NOW.timestamp()
EVERY_10S = Schedule.every("10s")
TRACEBACK = (
    'Traceback (most recent call last):\n  File "job.py", line 3, in job\n'
    "    raise RuntimeError('disk full')\nRuntimeError: disk full"
)


def runs(name: str, outcomes: Sequence[str], error: str | None = TRACEBACK) -> list[RunRecord]:
    """Runs of ``name``, newest first, one tick of 10 s apart."""
    made = []
    for age, outcome in enumerate(outcomes):
        started = DB_NOW - 10 * (age + 1)
        made.append(
            RunRecord(
                name=name,
                slot=slot_of(NOW - timedelta(seconds=10 * (age + 1))),
                manual=False,
                fence=100 - age,
                holder="web-1:42:abc123#00ff00ff00ff00ff",
                scheduled_for=started,
                started_at=started,
                finished_at=None if outcome == "running" else started + 1,
                outcome=outcome,  # type: ignore[arg-type]
                error=None if outcome in ("succeeded", "running") else error,
            )
        )
    return made


def lease(name: str, *, paused: bool = False, held: bool = False) -> LeaseInfo:
    return LeaseInfo(
        name=name,
        holder="web-1:42:abc123#00ff00ff00ff00ff",
        fence=100,
        slot=slot_of(NOW - timedelta(seconds=10)),
        acquired_at=DB_NOW - 10,
        expires_at=DB_NOW + (30 if held else -5),
        paused=paused,
        fingerprint=None,
    )


def build(
    tasks: Sequence[DeclaredTask],
    history: dict[str, list[RunRecord]],
    *,
    limit: int | None = None,
    rows: Sequence[LeaseInfo] = (),
    skipped: dict[str, dict[str, int]] | None = None,
) -> StatusReport:
    snapshot = Snapshot(leases=tuple(rows), runs=history, db_now=DB_NOW, runs_limit=limit)
    return build_report(
        snapshot, tasks, database="sqlite:///x.db", now=NOW, since=NOW, skipped=skipped
    )


def status_of(outcomes: Sequence[str], alert_after: int = 1, **options: Any) -> TaskStatus:
    task = DeclaredTask(name="job", schedule=EVERY_10S, alert_after=alert_after)
    (status,) = build([task], {"job": runs("job", outcomes)}, **options).tasks
    return status


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([], (0, False)),
        (["succeeded", "failed"], (0, False)),
        (["failed", "timed_out", "lost", "abandoned", "succeeded", "failed"], (4, False)),
        # neither a failure nor a success: passed over, the streak goes on behind them
        (["running", "failed", "interrupted", "missed", "failed", "succeeded"], (2, False)),
        (["interrupted", "succeeded"], (0, False)),
    ],
)
def test_a_streak_counts_the_failures_up_to_the_latest_success(
    outcomes: list[Outcome], expected: tuple[int, bool]
) -> None:
    assert failure_streak(outcomes, read_all=True) == expected


def test_a_streak_with_no_success_among_the_runs_read_is_at_least_its_count() -> None:
    assert failure_streak(["failed", "failed"], read_all=False) == (2, True)
    assert failure_streak(["failed", "failed"], read_all=True) == (2, False)
    assert failure_streak(["running"], read_all=False) == (0, False)


def test_the_read_for_a_streak_is_the_largest_threshold_and_one_for_a_running_run() -> None:
    assert streak_runs([1, 3, 2]) == 4
    assert streak_runs([]) == 2


def test_a_task_failing_every_run_is_failing_once_it_reaches_alert_after() -> None:
    once = status_of(["failed"])
    assert once.consecutive_failures == 1 and once.failing
    assert once.shown_state == "failing"
    twice = status_of(["failed", "failed", "succeeded"], alert_after=3)
    assert twice.consecutive_failures == 2 and not twice.failing
    assert twice.shown_state == "idle"
    thrice = status_of(["failed", "failed", "failed", "succeeded"], alert_after=3)
    assert thrice.failing


def test_the_streak_is_at_least_its_count_when_as_many_runs_as_asked_all_failed() -> None:
    capped = status_of(["failed", "failed"], limit=2)
    assert (capped.consecutive_failures, capped.streak_capped) == (2, True)
    assert capped.failure_text == "at least 2 runs in a row"
    whole = status_of(["failed", "failed"], limit=3)
    assert (whole.consecutive_failures, whole.streak_capped) == (2, False)
    assert whole.failure_text == "2 runs in a row"


def test_a_run_going_now_does_not_end_a_streak_and_the_task_still_shows_failing() -> None:
    task = DeclaredTask(name="job", schedule=EVERY_10S)
    report = build(
        [task], {"job": runs("job", ["running", "failed"])}, rows=[lease("job", held=True)]
    )
    (status,) = report.tasks
    assert status.running and status.state == "running"
    assert status.failing and status.shown_state == "failing"


def test_a_paused_task_shows_paused_and_its_failure_does_not_alert() -> None:
    task = DeclaredTask(name="job", schedule=EVERY_10S)
    report = build([task], {"job": runs("job", ["failed"])}, rows=[lease("job", paused=True)])
    (status,) = report.tasks
    assert status.failing and status.shown_state == "paused"
    assert report.failing == () and report.health().ok


def test_a_disabled_task_is_not_failing() -> None:
    task = DeclaredTask(name="job", schedule=EVERY_10S, enabled=False)
    (status,) = build([task], {"job": runs("job", ["failed"])}).tasks
    assert status.consecutive_failures == 1 and not status.failing


def test_health_names_the_failing_task_its_streak_and_the_last_error_summary() -> None:
    tasks = [
        DeclaredTask(name="flaky", schedule=EVERY_10S, alert_after=3),
        DeclaredTask(name="broken", schedule=EVERY_10S, alert_after=3),
        DeclaredTask(name="fine", schedule=EVERY_10S),
    ]
    history = {
        "flaky": runs("flaky", ["failed", "failed", "succeeded"]),
        "broken": runs("broken", ["failed", "timed_out", "failed", "succeeded"]),
        "fine": runs("fine", ["succeeded", "failed"]),
    }
    report = build(tasks, history, limit=4)
    health = report.health()
    assert not health.ok
    assert health.failing == report.failing == ("broken",)
    assert health.problems == (
        "broken is failing (3 runs in a row, last: RuntimeError: disk full)",
    )
    assert health_json(health)["failing"] == ["broken"]


def test_an_orphaned_row_has_no_threshold_and_never_fails() -> None:
    report = build([], {"gone": runs("gone", ["failed"])}, rows=[lease("gone")])
    (orphan,) = report.orphaned
    assert orphan.alert_after is None and not orphan.failing
    assert report.health().ok


def test_recent_outcomes_are_the_last_twenty_newest_first() -> None:
    outcomes = ["failed", "succeeded"] * 15
    status = status_of(outcomes)
    assert status.recent_outcomes == tuple(outcomes[:RECENT_OUTCOMES])
    assert len(status.recent_outcomes) == RECENT_OUTCOMES == 20


def test_skipped_ticks_are_those_the_building_replica_counted_for_the_task() -> None:
    task = DeclaredTask(name="job", schedule=EVERY_10S)
    report = build([task], {}, skipped={"job": {"overlap": 2}, "other": {"capacity": 1}})
    (status,) = report.tasks
    assert dict(status.skipped) == {"overlap": 2}
    assert dict(build([task], {}).tasks[0].skipped) == {}


def test_the_json_form_carries_the_failure_fields() -> None:
    task = DeclaredTask(name="job", schedule=EVERY_10S, alert_after=2)
    report = build(
        [task], {"job": runs("job", ["failed", "failed"])}, limit=2, skipped={"job": {"overlap": 1}}
    )
    data = report_json(report)
    (job,) = data["tasks"]
    assert data["failing"] == ["job"]
    assert job["shown_state"] == "failing" and job["failing"] is True
    assert job["consecutive_failures"] == 2 and job["consecutive_failures_at_least"] is True
    assert job["alert_after"] == 2
    assert job["recent_outcomes"] == ["failed", "failed"]
    assert job["skipped"] == {"overlap": 1}


@pytest.mark.parametrize("value", [0, -1, 101, True, "3", 2.0])
def test_alert_after_is_a_whole_number_from_one(value: object) -> None:
    with pytest.raises(ConfigError, match=r"task 'job': alert_after must be a whole number"):
        Task.declare(lambda: None, every="1m", name="job", alert_after=value)  # type: ignore[arg-type]


def test_alert_after_is_set_by_the_decorator_and_reaches_the_declared_status(
    tmp_path: Path,
) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'x.db'}")
    task = scheduler.add_task(lambda: None, every="1m", name="job", alert_after=3)
    assert task.alert_after == 3
    assert DeclaredTask.of(task).alert_after == 3
    assert Task.declare(lambda: None, every="1m", name="other").alert_after == 1


def toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cronlease.toml"
    path.write_text('[tasks.sync]\ncall = "os:getcwd"\nevery = "1m"\n' + body, encoding="utf-8")
    return path


def test_alert_after_in_the_file_reaches_the_spec(tmp_path: Path) -> None:
    assert (
        load_config(toml(tmp_path, "alert_after = 3\n"), import_calls=False)
        .tasks["sync"]
        .alert_after
        == 3
    )
    assert load_config(toml(tmp_path, ""), import_calls=False).tasks["sync"].alert_after == 1


@pytest.mark.parametrize("line", ["alert_after = 0", 'alert_after = "3"', "alert_after = true"])
def test_a_bad_alert_after_in_the_file_names_file_task_key_and_line(
    tmp_path: Path, line: str
) -> None:
    path = toml(tmp_path, line + "\n")
    with pytest.raises(ConfigFileError) as raised:
        load_config(path, import_calls=False)
    error = raised.value
    assert error.task == "sync" and error.key == "alert_after" and error.line == 4
    assert str(path) in str(error) and "whole number from 1 to 100" in str(error)
