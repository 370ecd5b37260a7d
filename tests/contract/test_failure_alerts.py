"""A task failing run after run is reported failing by health() and the metrics, on every
backend: the streak is read from the run history with the one recent-runs statement."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event as sa_event

from cronlease import Scheduler
from cronlease.errors import CommandError
from cronlease.prometheus import instrument


def test_health_reports_a_task_failing_alert_after_runs_in_a_row(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url)
    outcomes = iter(["fail", "fail", "fail", "ok"])

    def flaky() -> None:
        if next(outcomes) == "fail":
            raise RuntimeError("disk full")

    scheduler.add_task(flaky, every="1h", name=task_name, alert_after=3)
    scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-fine")
    try:
        assert scheduler.run_now(task_name) == "failed"
        assert scheduler.run_now(task_name) == "failed"
        health = scheduler.health()
        assert health.ok and health.failing == (), health.problems  # 2 of 3: not yet
        assert scheduler.run_now(task_name) == "failed"
        statements: list[str] = []
        sa_event.listen(
            scheduler.store.engine, "before_cursor_execute", lambda *a: statements.append(a[2])
        )
        health = scheduler.health()
        assert not health.ok and health.failing == (task_name,)
        assert health.problems == (
            f"{task_name} is failing (3 runs in a row, last: RuntimeError: disk full)",
        )
        # the runs of every task in one statement (the lease rows and the clock are the others)
        assert sum("cronlease_runs" in text for text in statements) == 1, statements
        assert scheduler.run_now(task_name) == "succeeded"
        assert scheduler.health().ok
    finally:
        scheduler.runner.close()


def test_a_failing_streak_is_one_warning_when_it_starts_and_one_info_when_it_ends(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(db_url)
    plan = iter(["fail"] * 4 + ["ok", "ok"] + ["fail"] * 2)

    def flaky() -> None:
        if next(plan) == "fail":
            raise RuntimeError("disk full")

    scheduler.add_task(flaky, every="1h", name=task_name, alert_after=2)
    try:
        outcomes = [scheduler.run_now(task_name) for _ in range(8)]
        assert outcomes == ["failed"] * 4 + ["succeeded"] * 2 + ["failed"] * 2
    finally:
        scheduler.runner.close()
    said = [
        (record.levelname, record.getMessage())
        for record in caplog.records
        if task_name in record.getMessage()
        and ("failing" in record.getMessage() or "recovered" in record.getMessage())
    ]
    failing = (
        f"{task_name} is failing: 2 runs in a row did not succeed (alert_after=2); "
        "last: RuntimeError: disk full"
    )
    assert said == [
        ("WARNING", failing),  # at the second failure, not at the third or the fourth
        ("INFO", f"{task_name} recovered: succeeded after 4 runs in a row that did not"),
        ("WARNING", failing),  # a new streak; the second success said nothing
    ]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_metrics_export_failing_and_the_streak_and_the_staging_tallies(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url)

    def broken() -> None:
        raise RuntimeError("boom")

    scheduler.add_task(broken, every="1h", name=task_name, alert_after=2)
    registry = CollectorRegistry()
    metrics = instrument(scheduler, registry, abandoned_refresh=0)
    try:
        assert scheduler.run_now(task_name) == "failed"

        def sample(name: str) -> float | None:
            return registry.get_sample_value(name, {"task": task_name})

        assert (sample("cronlease_task_failing"), sample("cronlease_consecutive_failures")) == (
            0,
            1,
        )
        assert scheduler.run_now(task_name) == "failed"
        assert (sample("cronlease_task_failing"), sample("cronlease_consecutive_failures")) == (
            1,
            2,
        )
        for name in ("ticks_left_to_peers", "ticks_delayed", "ticks_checked_taken"):
            assert registry.get_sample_value(f"cronlease_{name}_total") == 0
        scheduler.stats.add("ticks_left_to_peers", 5)
        assert registry.get_sample_value("cronlease_ticks_left_to_peers_total") == 5
    finally:
        metrics.close()
        scheduler.runner.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_python_task_raising_command_error_keeps_its_traceback(
    db_url: str, task_name: str
) -> None:
    # only a command task's CommandError is its whole story; a Python task that raises
    # one (it is public) is a Python failure like any other
    scheduler = Scheduler(db_url)

    def wraps_a_tool() -> None:
        raise CommandError("the tool said no")

    scheduler.add_task(wraps_a_tool, every="1h", name=task_name)
    try:
        assert scheduler.run_now(task_name) == "failed"
        (run,) = scheduler.store.history(task_name, 1)
        assert run.error is not None
        assert run.error.startswith("Traceback (most recent call last):")
        assert "in wraps_a_tool" in run.error
        assert run.error.endswith("CommandError: the tool said no")
    finally:
        scheduler.runner.close()
