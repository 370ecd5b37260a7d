"""Heartbeats keep a long run's lease; a run that cannot renew is told it lost it."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from cronlease import LeaseStore, RunContext, Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._timing.schedule import slot_of
from tests.conftest import url_for
from tests.support.leases import won
from tests.support.procs import wait_for
from tests.support.tcpproxy import TcpProxy


def later_request(name: str, fire_time: datetime, seconds: float) -> AcquireRequest:
    return AcquireRequest(
        name=name,
        slot=slot_of(fire_time + timedelta(seconds=seconds)),
        ttl=1.0,
        holder="other-replica",
        tolerance=3600,
    )


@pytest.mark.slow
def test_heartbeats_keep_a_long_run_exclusive(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    release = threading.Event()
    started = threading.Event()
    seen: list[RunContext] = []

    def long_run(ctx: RunContext) -> None:
        seen.append(ctx)
        started.set()
        release.wait(30)

    task = scheduler.add_task(long_run, every="1s", lease_ttl=1, name=task_name, grace="30s")
    other = LeaseStore.from_url(db_url)
    fire_time = datetime.now(timezone.utc)
    runner = threading.Thread(target=scheduler.runner.run_tick, args=(task, fire_time))
    runner.start()
    try:
        assert started.wait(10)
        # Three TTLs later the lease is still held: renewals work.
        deadline = time.monotonic() + 3.0
        attempts = 0
        while time.monotonic() < deadline:
            assert won(other.acquire(later_request(task_name, fire_time, 1))) is None
            attempts += 1
            time.sleep(0.1)
        assert attempts > 10
        assert not seen[0].lost
    finally:
        release.set()
        runner.join(10)
    # Released on finish: the next slot is free at once.
    assert won(other.acquire(later_request(task_name, fire_time, 1))) is not None
    assert scheduler.store.history(task_name)[-1].outcome == "succeeded"
    other.dispose()
    scheduler.runner.close()


def test_run_that_cannot_renew_learns_it_lost_the_lease(tmp_path: Path, task_name: str) -> None:
    real = make_url(url_for("postgresql", tmp_path))
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.up()
    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    scheduler = Scheduler(url)
    direct = LeaseStore.from_url(real.render_as_string(hide_password=False))
    lost_seen = threading.Event()
    contexts: list[RunContext] = []
    finish = threading.Event()

    def long_run(ctx: RunContext) -> None:
        contexts.append(ctx)
        wait_for(lambda: ctx.lost, 20, "ctx.lost")
        lost_seen.set()
        finish.wait(30)

    task = scheduler.add_task(long_run, every="1s", lease_ttl=1, name=task_name, grace="30s")
    fire_time = datetime.now(timezone.utc)
    outcome: list[str | None] = []
    runner = threading.Thread(
        target=lambda: outcome.append(scheduler.runner.run_tick(task, fire_time))
    )
    runner.start()
    try:
        wait_for(lambda: contexts, 10, "the run to start")
        proxy.down()  # renewals now fail
        assert lost_seen.wait(10), "the run was never told it lost the lease"
        # Meanwhile another replica takes the expired lease for the next slot.
        taken = None
        deadline = time.monotonic() + 10
        while taken is None and time.monotonic() < deadline:
            taken = won(direct.acquire(later_request(task_name, fire_time, 1)))
        assert taken is not None and taken.fence == contexts[0].fence + 1
        proxy.up()
    finally:
        finish.set()
        runner.join(20)
    assert outcome == ["lost"]
    runs = {run.slot: run for run in direct.history(task_name)}
    old = runs[contexts[0].slot]
    assert old.outcome == "lost"
    # The late finish of the old run did not free the new holder's lease.
    (row,) = direct.leases([task_name])
    assert (row.fence, row.holder) == (taken.fence, taken.holder)
    assert abs(row.expires_at - row.acquired_at - 1.0) < 0.01
    direct.dispose()
    scheduler.runner.close()
    proxy.down()
