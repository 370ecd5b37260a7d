"""Many tasks due at one instant: schedule groups, split acquisition, the finisher.

What the fleet benchmark relies on for its start lateness, pinned on real
databases: tasks with identical schedules share one APScheduler job and
still fire one by one; a large batch is acquired as two statements that
never win a slot twice, even racing other replicas doing the same. (Who
tries which tick first: tests/contract/test_fleet.py.)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime, timezone

import pytest

from cronlease import LeaseStore, RunContext, Scheduler
from cronlease._events import EventBus, RunFinished, RunStarted, TickSkipped
from cronlease._options import schedule_of
from cronlease._run.acquisition.leases import LARGE_BATCH
from cronlease._run.recording.recorder import Finisher
from cronlease._run.timer.ticks import Tick
from cronlease._task import Task
from cronlease._timing.schedule import time_of_slot
from cronlease.errors import ConfigError
from tests.support.procs import wait_for


def _fire_time() -> datetime:
    """A fire time of every 10 s task anchored at it, well within its 5 s grace."""
    return time_of_slot(int(time.time()) * 1000).astimezone(timezone.utc)


def _replica(
    db_url: str, prefix: str, count: int, anchor: datetime
) -> tuple[Scheduler, list[Task]]:
    # every run of the tick handed out at once: a worker slot each (docs/design.md §4.3)
    scheduler = Scheduler(db_url, history_retention=None, max_workers=count)
    tasks = [
        scheduler.add_task(lambda: None, every="10s", name=f"{prefix}-{i:04d}", anchor=anchor)
        for i in range(count)
    ]
    scheduler.runner.ensure_schema()
    return scheduler, tasks


def _close(*schedulers: Scheduler) -> None:
    for scheduler in schedulers:
        scheduler.store.fleet.leave([scheduler.holder])
        scheduler.runner.close()
        scheduler.store.dispose()


def test_tasks_with_one_schedule_share_a_job_and_each_runs(tmp_path: object) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path}/groups.db", history_retention=None)
    runs: Counter[str] = Counter()
    lock = threading.Lock()

    def note(ctx: RunContext) -> None:
        with lock:
            runs[ctx.name] += 1

    for name in ("a", "b", "c"):
        scheduler.add_task(note, every="1s", name=name)
    scheduler.add_task(note, every="2s", name="slow")
    with scheduler:
        firing = scheduler._firing
        assert firing is not None
        apscheduler = firing.apscheduler

        def leased_jobs() -> int:
            return sum(job.executor == "default" for job in apscheduler.get_jobs())

        # every 1s, every 2s, the stuck watcher's minute (housekeeping is off)
        assert leased_jobs() == 3
        scheduler.add_task(note, every="1s", name="late")  # joins the running group
        assert leased_jobs() == 3
        wait_for(lambda: all(runs[n] >= 2 for n in ("a", "b", "c", "late")), 20, "every task")
        wait_for(lambda: runs["slow"] >= 1, 20, "the task of its own schedule")


def test_two_replicas_acquiring_large_batches_in_halves_win_each_slot_once(
    db_url: str, task_name: str
) -> None:
    """Every replica has a view of the fleet and splits its batch: no deadlock, one winner."""
    anchor = _fire_time()
    count = LARGE_BATCH * 2
    replicas = [_replica(db_url, task_name, count, anchor) for _ in range(3)]
    for scheduler, _ in replicas:  # a view of the fleet: batches are split
        assert scheduler.runner.membership.renew() is not None
    skips: list[TickSkipped] = []
    gate = threading.Barrier(len(replicas))
    failures: list[BaseException] = []

    def race(scheduler: Scheduler, tasks: list[Task]) -> None:
        scheduler.listen(skips.append, TickSkipped)
        try:
            gate.wait(timeout=30)
            # winners run on this thread as soon as each is registered
            batch = scheduler.runner.acquire_ticks(
                [Tick(t, anchor) for t in tasks], dispatch=lambda run: run()
            )
            assert batch.runs == []
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=race, args=replica) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert not failures, failures
        store = replicas[0][0].store
        slot = int(anchor.timestamp() * 1000)
        for task in replicas[0][1]:
            wait_for(
                lambda task=task: (
                    [r.outcome for r in store.history(task.full_name)] == ["succeeded"]
                ),
                10,
                f"{task.full_name} to have run once",
            )
        ran = sum(scheduler.stats["runs_succeeded"] for scheduler, _ in replicas)
        assert ran == count
        assert len(skips) == count * (len(replicas) - 1)
        assert all(skip.slot == slot for skip in skips)
        assert all(scheduler.stats["lease_errors"] == 0 for scheduler, _ in replicas)
    finally:
        _close(*(scheduler for scheduler, _ in replicas))


def test_the_finisher_records_runs_that_end_together_at_once() -> None:
    recorded: list[list[int]] = []
    finisher: Finisher[int] = Finisher(recorded.append)
    for _ in range(3):
        finisher.started()
    for item in (1, 2, 3):
        finisher.ended(item)
    wait_for(lambda: sum(len(group) for group in recorded) == 3, 5, "the runs to be recorded")
    assert [item for group in recorded for item in group] == [1, 2, 3]
    finisher.started()
    finisher.ended(4)
    finisher.close()
    assert recorded[-1] == [4]


def test_an_event_bus_knows_whether_anyone_listens() -> None:
    bus = EventBus()
    assert not bus.wants(RunStarted)
    received: list[object] = []
    unsubscribe = bus.listen(received.append, RunFinished)
    assert bus.wants(RunFinished) and not bus.wants(RunStarted)
    everything = bus.listen(received.append)
    assert bus.wants(RunStarted) and bus.wants(TickSkipped)
    everything()
    unsubscribe()
    assert not bus.wants(RunFinished)


def test_lease_rows_of_40000_names_are_read(store: LeaseStore, task_name: str) -> None:
    """What start reads (the schedule check, catch-up): the rows of every task, by name,
    more than SQLite's default bound-parameter limit (32,766): in chunks there, as one
    array on PostgreSQL."""
    from cronlease._lease.model import AcquireRequest

    ran = [f"{task_name}-{index}" for index in (7, 20_000, 39_999)]
    for name in ran:
        store.acquire(AcquireRequest(name=name, slot=1000, ttl=30.0, holder="h"))
    names = [f"{task_name}-{index}" for index in range(40_000)]
    rows = store.leases(names)
    assert sorted(row.name for row in rows) == sorted(ran)
    assert all(row.slot == 1000 for row in rows)


def test_tasks_of_one_schedule_share_one_schedule_object() -> None:
    """100,000 tasks of one schedule: one Schedule (and APScheduler trigger), not one each;
    a different schedule is another object."""
    anchor = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def note(ctx: RunContext) -> None:
        """A task."""

    first, second = (
        Task.declare(note, name=f"t{index}", every="1h", anchor=anchor) for index in range(2)
    )
    other = Task.declare(note, name="t2", every="2h", anchor=anchor)
    assert first.schedule is second.schedule
    assert other.schedule is not first.schedule
    assert first.context_as == second.context_as == ""


def test_a_shared_schedule_never_stands_in_for_a_refused_value() -> None:
    """1 and True are equal keys to an untyped cache: ``every=True`` is refused whether or
    not ``every=1`` was made first (``schedule_of`` is where shared schedules are made)."""
    assert str(schedule_of({"every": 1})) == "every 1s"
    with pytest.raises(ConfigError, match="not True"):
        schedule_of({"every": True})
