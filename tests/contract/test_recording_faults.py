"""A run that could not be recorded still leaves the running set.

Whatever the write of its outcome raises — a driver error SQLAlchemy does not
wrap, a KeyboardInterrupt-like exception — the run must leave the replica's
running set, or every later tick of its task would be skipped as an overlap and
shutdown would wait for it until its timeout. The fault is injected into the
store's finishing write of a real SQLite database.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cronlease import Scheduler, TickSkipped
from cronlease._lease.model import FinishRequest
from cronlease._lease.store import LeaseStore
from cronlease._run.timer.ticks import Tick


class FailingFinish(LeaseStore):
    def finish_many(self, items: Sequence[FinishRequest]) -> None:
        raise RuntimeError("the driver broke in a way SQLAlchemy does not wrap")


def scheduler_with_failing_finish(tmp_path: Path) -> Scheduler:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'faults.db'}", history_retention=None)
    scheduler.store = scheduler.runner.store = FailingFinish(scheduler.store.engine)
    scheduler.runner = scheduler._make_runner()
    return scheduler


def test_a_run_now_whose_record_fails_leaves_the_running_set(tmp_path: Path) -> None:
    scheduler = scheduler_with_failing_finish(tmp_path)
    scheduler.add_task(lambda: None, every="1h", name="hourly")
    try:
        assert scheduler.run_now("hourly") == "succeeded"
        assert scheduler.runner.running == []
        assert scheduler.runner.wait_idle(0.5)
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()


def test_a_dispatched_run_whose_record_fails_leaves_the_running_set(tmp_path: Path) -> None:
    scheduler = scheduler_with_failing_finish(tmp_path)
    task = scheduler.add_task(lambda: None, every="1h", name="hourly")
    fire_time = datetime.now(timezone.utc).replace(microsecond=0)
    try:
        decision = scheduler.runner.acquire_ticks(
            [Tick(task, fire_time)], dispatch=lambda run: run()
        )
        assert decision.retries == []
        # recorded (and failing) on the finisher thread, which must survive it
        assert scheduler.runner.wait_idle(5.0)
        assert scheduler.runner.running == []
        # the next tick goes to the database (whose lease, unreleased, refuses it) instead
        # of being skipped here as an overlap
        skips: list[TickSkipped] = []
        scheduler.listen(skips.append, TickSkipped)
        later = scheduler.runner.acquire_ticks([Tick(task, fire_time + timedelta(seconds=1))])
        assert later.runs == [] and [skip.reason for skip in skips] == ["held"]
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
