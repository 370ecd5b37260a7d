"""Prometheus metrics carry the values of real runs, skips, lost leases and outages."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from sqlalchemy import event as sa_event
from sqlalchemy import update

from cronlease import RunContext, Scheduler
from cronlease._lease.schema import leases
from cronlease.prometheus import instrument
from tests.support.attempts import abandon_runs, past_slot
from tests.support.procs import wait_for


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def fire_times(count: int) -> list[datetime]:
    """Consecutive distinct ticks just before now (each a new slot, all within grace)."""
    now = datetime.now(timezone.utc)
    return [now - timedelta(milliseconds=count - index) for index in range(count)]


def test_runs_durations_and_last_success_after_real_runs(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    registry = CollectorRegistry()
    ok = scheduler.add_task(lambda: time.sleep(0.02), every="1m", name=task_name)

    def broken() -> None:
        raise RuntimeError("boom")

    bad = scheduler.add_task(broken, every="1m", name=f"{task_name}-bad")
    metrics = instrument(scheduler, registry)
    # Declared tasks are exported at zero before their first run.
    assert value(registry, "cronlease_runs_total", task=task_name, outcome="succeeded") == 0
    assert value(registry, "cronlease_run_duration_seconds_count", task=task_name) == 0

    started = time.time()
    for fire_time in fire_times(3):
        assert scheduler.runner.run_tick(ok, fire_time) == "succeeded"
    assert scheduler.runner.run_tick(bad, fire_times(1)[0]) == "failed"

    history = scheduler.store.history(task_name, 10)
    assert [run.outcome for run in history] == ["succeeded"] * 3
    assert value(registry, "cronlease_runs_total", task=task_name, outcome="succeeded") == 3
    assert value(registry, "cronlease_runs_total", task=task_name, outcome="failed") == 0
    assert value(registry, "cronlease_run_duration_seconds_count", task=task_name) == 3
    duration_sum = value(registry, "cronlease_run_duration_seconds_sum", task=task_name)
    assert duration_sum is not None and 0.06 <= duration_sum < 5
    # 0.02 s runs fall in the 0.025 .. 0.05 s buckets, not below
    assert value(registry, "cronlease_run_duration_seconds_bucket", task=task_name, le="0.01") == 0
    assert value(registry, "cronlease_run_duration_seconds_bucket", task=task_name, le="+Inf") == 3
    last = value(registry, "cronlease_last_success_timestamp_seconds", task=task_name)
    assert last is not None and started <= last <= time.time()

    assert value(registry, "cronlease_runs_total", task=bad.full_name, outcome="failed") == 1
    assert value(registry, "cronlease_runs_total", task=bad.full_name, outcome="succeeded") == 0
    assert value(registry, "cronlease_last_success_timestamp_seconds", task=bad.full_name) is None
    assert value(registry, "cronlease_runs_in_progress", task=task_name) == 0
    # First contact with the database measured the clock.
    skew = value(registry, "cronlease_clock_skew_seconds")
    round_trip = value(registry, "cronlease_clock_round_trip_seconds")
    assert skew is not None and abs(skew) < 2
    assert round_trip is not None and round_trip > 0
    assert value(registry, "cronlease_database_up") == 1

    text = generate_latest(registry).decode()
    assert f'cronlease_runs_total{{outcome="succeeded",task="{task_name}"}} 3.0' in text
    assert "# TYPE cronlease_run_duration_seconds histogram" in text

    metrics.close()
    assert value(registry, "cronlease_runs_total", task=task_name, outcome="succeeded") is None
    assert scheduler.runner.run_tick(ok, fire_times(1)[0]) == "succeeded"  # no error after close
    scheduler.runner.close()


def test_each_replica_counts_its_runs_and_why_it_skipped(db_url: str, task_name: str) -> None:
    """Summed over the fleet, runs are counted once per tick; losers say why they skipped."""
    replicas = [Scheduler(db_url), Scheduler(db_url)]
    registries = [CollectorRegistry(), CollectorRegistry()]
    tasks = [r.add_task(lambda: None, every="1m", name=task_name) for r in replicas]
    for replica, registry in zip(replicas, registries, strict=True):
        instrument(replica, registry)
    ticks = fire_times(4)
    for index, fire_time in enumerate(ticks):
        order = [0, 1] if index % 2 == 0 else [1, 0]
        outcomes = [replicas[i].runner.run_tick(tasks[i], fire_time) for i in order]
        # why each skipped, if one did not run (seen once in CI, [None, None], unexplained)
        why = [(i, replicas[i].skipped_ticks, replicas[i].stats) for i in order]
        assert outcomes == ["succeeded", None], (index, fire_time, why)
    runs = [
        value(registry, "cronlease_runs_total", task=task_name, outcome="succeeded")
        for registry in registries
    ]
    assert runs == [2, 2]
    taken = [
        value(registry, "cronlease_ticks_skipped_total", task=task_name, reason="taken")
        for registry in registries
    ]
    assert taken == [2, 2]
    replicas[0].pause(task_name)
    assert replicas[0].runner.run_tick(tasks[0], datetime.now(timezone.utc)) is None
    assert (
        value(registries[0], "cronlease_ticks_skipped_total", task=task_name, reason="paused") == 1
    )
    for replica in replicas:
        replica.runner.close()


def test_a_lost_lease_is_counted(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    registry = CollectorRegistry()
    instrument(scheduler, registry)

    def long_run(ctx: RunContext) -> None:
        wait_for(lambda: ctx.lost, 10, "ctx.lost")

    task = scheduler.add_task(long_run, every="1s", lease_ttl=1, name=task_name, grace="30s")
    result: list[str | None] = []
    thread = threading.Thread(
        target=lambda: result.append(scheduler.runner.run_tick(task, datetime.now(timezone.utc)))
    )
    thread.start()
    wait_for(lambda: value(registry, "cronlease_runs_in_progress", task=task_name) == 1, 10)
    # Another replica takes the lease over: the next heartbeat finds a newer fence.
    with scheduler.store.engine.begin() as conn:
        conn.execute(
            update(leases).where(leases.c.name == task_name).values(fence=leases.c.fence + 1)
        )
    thread.join(15)
    assert result == ["lost"]
    assert value(registry, "cronlease_leases_lost_total", task=task_name) == 1
    assert value(registry, "cronlease_runs_total", task=task_name, outcome="lost") == 1
    assert value(registry, "cronlease_runs_in_progress", task=task_name) == 0
    scheduler.runner.close()


def test_a_database_outage_and_its_recovery(tmp_path: Path, task_name: str) -> None:
    """A real outage: the SQLite file's directory does not exist until the test creates it."""
    folder = tmp_path / "not-yet"
    scheduler = Scheduler(f"sqlite:///{folder / 'cronlease.db'}")
    registry = CollectorRegistry()
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    instrument(scheduler, registry)
    with scheduler:
        wait_for(
            lambda: (value(registry, "cronlease_lease_errors_total", task=task_name) or 0) >= 1,
            10,
            "a tick skipped for a database error",
        )
        assert value(registry, "cronlease_database_up") == 0
        assert value(registry, "cronlease_database_outages_total") == 1
        errors = value(registry, "cronlease_ticks_skipped_total", task=task_name, reason="error")
        assert errors == value(registry, "cronlease_lease_errors_total", task=task_name)
        folder.mkdir()
        wait_for(
            lambda: value(registry, "cronlease_runs_total", task=task_name, outcome="succeeded"),
            10,
            "a run after the database came back",
        )
        assert value(registry, "cronlease_database_up") == 1
        assert value(registry, "cronlease_database_outages_total") == 1


@pytest.mark.slow
def test_a_retry_is_counted_as_a_later_attempt_by_its_outcome(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-once")
    registry = CollectorRegistry()

    # anchored a second from now: the first tick then, not up to a period later
    soon = datetime.fromtimestamp(int(time.time()) + 1, timezone.utc)

    @scheduler.task(every="5s", name=task_name, retries=1, retry_delay=0.2, anchor=soon)
    def flaky(ctx: RunContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")

    instrument(scheduler, registry)
    # declared at zero for a task that may retry, and only for such a task
    assert value(registry, "cronlease_later_attempts_total", task=task_name, outcome="failed") == 0
    once = f"{task_name}-once"
    assert value(registry, "cronlease_later_attempts_total", task=once, outcome="failed") is None
    try:
        with scheduler:
            wait_for(
                lambda: value(
                    registry, "cronlease_later_attempts_total", task=task_name, outcome="succeeded"
                ),
                30,
                "a retry that succeeded",
            )
    finally:
        scheduler.store.dispose()
    history = scheduler.store.history(task_name, 20)
    (retry,) = [run for run in history if run.attempt == 2]
    attempts = sorted((run.attempt, run.outcome) for run in history if run.slot == retry.slot)
    assert attempts == [(1, "failed"), (2, "succeeded")]
    # runs_total counts every attempt, as before; the later attempt once more here
    assert (value(registry, "cronlease_runs_total", task=task_name, outcome="failed") or 0) >= 1
    assert value(registry, "cronlease_later_attempts_total", task=task_name, outcome="failed") == 0


def test_abandoned_runs_are_the_database_count_read_at_most_once_per_refresh(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-calm")
    store = scheduler.store
    store.create_tables()
    abandon_runs(store, task_name, 2, first_slot=past_slot(600))
    statements: list[str] = []
    sa_event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    registry = CollectorRegistry()
    metrics = instrument(scheduler, registry, abandoned_refresh=3600)
    assert statements == []  # registering reads nothing
    assert value(registry, "cronlease_abandoned_runs", task=task_name) == 2
    read = len(statements)
    assert read > 0
    assert value(registry, "cronlease_abandoned_runs", task=f"{task_name}-calm") == 0
    text = generate_latest(registry).decode()
    assert "# TYPE cronlease_abandoned_runs gauge" in text
    assert f'cronlease_abandoned_runs{{task="{task_name}"}} 2.0' in text

    abandon_runs(store, task_name, 1, first_slot=past_slot(300))
    # within the refresh, scrapes are served the last read, without a statement
    del statements[:]
    assert value(registry, "cronlease_abandoned_runs", task=task_name) == 2
    assert statements == []
    # another replica (refreshing at every scrape) reads the same database: the same count
    other = CollectorRegistry()
    instrument(Scheduler(db_url), other, abandoned_refresh=0)  # no task: no series
    assert value(other, "cronlease_abandoned_runs", task=task_name) is None
    fresh = CollectorRegistry()
    replica = Scheduler(db_url)
    replica.add_task(lambda: None, every="1h", name=task_name)
    instrument(replica, fresh, abandoned_refresh=0)
    assert value(fresh, "cronlease_abandoned_runs", task=task_name) == 3

    metrics.close()
    assert value(registry, "cronlease_abandoned_runs", task=task_name) is None
    for each in (scheduler, replica):
        each.runner.close()


def test_abandoned_runs_are_absent_while_the_database_is_down_then_read(
    tmp_path: Path, task_name: str
) -> None:
    folder = tmp_path / "not-yet"  # the database is unreachable until the folder exists
    scheduler = Scheduler(f"sqlite:///{folder / 'cronlease.db'}")
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    registry = CollectorRegistry()
    instrument(scheduler, registry, abandoned_refresh=0)
    assert not folder.exists()
    with scheduler:
        wait_for(lambda: value(registry, "cronlease_database_up") == 0, 10, "the outage seen")
        assert value(registry, "cronlease_abandoned_runs", task=task_name) is None
        folder.mkdir()
        wait_for(
            lambda: value(registry, "cronlease_abandoned_runs", task=task_name) == 0,
            10,
            "the count read once the database is back",
        )


@pytest.mark.parametrize("backend", ["sqlite"])
def test_default_registry_and_one_instrumentation_per_registry(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1m", name=task_name)
    metrics = instrument(scheduler)
    try:
        assert metrics.registry is REGISTRY
        assert (
            REGISTRY.get_sample_value(
                "cronlease_runs_total", {"task": task_name, "outcome": "succeeded"}
            )
            == 0
        )
        with pytest.raises(ValueError, match="Duplicated"):
            instrument(scheduler)
    finally:
        metrics.close()
    assert REGISTRY.get_sample_value("cronlease_database_up") is None
    scheduler.runner.close()
