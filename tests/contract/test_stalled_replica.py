"""health() of a replica that decides nothing, while the rest of the fleet runs every tick.

No task is overdue then (another replica runs them), so only the replica's own
pulse can tell (docs/design.md §5.18). Each test stops a real thread: APScheduler's
(paused), or the acquirer (blocked in a listener on a lock the test holds).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cronlease import RunContext, Scheduler, TickSkipped
from cronlease._status import Health
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow  # real ticks for a few seconds

STALLED = "timer or acquirer is stuck"


def stalled(scheduler: Scheduler) -> Health | None:
    health = scheduler.health()
    return health if any(STALLED in problem for problem in health.problems) else None


def changed(scheduler: Scheduler) -> Health | None:
    health = scheduler.health()
    return health if any("deleted or replaced" in problem for problem in health.problems) else None


def test_a_replica_whose_timer_stopped_is_unhealthy(tmp_path: Path, task_name: str) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    stuck, other = Scheduler(url), Scheduler(url)
    slots: list[int] = []
    for scheduler in (stuck, other):
        scheduler.add_task(lambda ctx: slots.append(ctx.slot), every="1s", name=task_name)
    with stuck, other:
        wait_for(lambda: len(slots) >= 2, 20, "runs")
        assert stuck.health().ok, stuck.health().problems
        firing = stuck._firing
        assert firing is not None
        firing.apscheduler.pause()  # its timer fires nothing from now on
        health = wait_for(lambda: stalled(stuck), 30, "the stuck replica to say so")
        assert other.health().ok, other.health().problems  # the fleet runs every tick
        assert not health.overdue
        firing.apscheduler.resume()
        wait_for(lambda: stuck.health().ok, 30, "health once it fires again")


def test_a_replica_whose_acquirer_hangs_is_unhealthy(tmp_path: Path, task_name: str) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    scheduler = Scheduler(url)
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    scheduler.runner.ensure_schema()
    scheduler.pause(task_name)  # every tick is refused, so none is overdue, ever
    gate = threading.Lock()
    blocked = threading.Event()

    def hang(_event: TickSkipped) -> None:
        # Emitted on the acquirer thread: it hangs here while the test holds the gate.
        if gate.locked():
            blocked.set()
            with gate:
                pass

    scheduler.listen(hang, TickSkipped)
    with scheduler:
        wait_for(lambda: scheduler.stats["ticks_skipped_paused"] >= 2, 20, "refused ticks")
        assert scheduler.health().ok, scheduler.health().problems
        with gate:
            wait_for(blocked.is_set, 20, "the acquirer to block")
            wait_for(lambda: stalled(scheduler), 30, "the replica to say it is stuck")
        wait_for(lambda: scheduler.health().ok, 30, "health once the acquirer goes on")


def test_health_names_a_replaced_sqlite_file(tmp_path: Path, task_name: str) -> None:
    path = tmp_path / "leases.db"
    scheduler = Scheduler(f"sqlite:///{path}")
    runs: list[int] = []

    def record(ctx: RunContext) -> None:
        runs.append(ctx.slot)

    scheduler.add_task(record, every="1s", name=task_name)
    with scheduler:
        wait_for(lambda: runs, 20, "a run")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        health = wait_for(lambda: changed(scheduler), 20, "the probe to name the file")
    assert not health.ok
