"""Crash recovery, catch-up after a fleet-wide outage, and a cold start of many replicas."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from cronlease import LeaseStore, Scheduler
from cronlease._lease.database import normalize_url
from cronlease._lease.model import AcquireRequest
from cronlease._timing.schedule import slot_of
from tests.conftest import url_for
from tests.support import ledger
from tests.support.leases import set_lease_end, won
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow
HOUR_MS = 3_600_000


def test_killed_holder_costs_only_the_tick_it_interrupted(db_url: str, task_name: str) -> None:
    """kill -9 mid-run: a survivor runs the very next tick (late pickup); the run is abandoned.

    Both replicas block in the task's first run (the first ledger entry), so the one
    that wins the first tick is the one killed: the test once waited, a coin toss per
    tick, until a replica that always blocked won one."""
    ledger.setup(db_url)
    first_blocks = {"CRONLEASE_TEST_BLOCK": "first"}
    replicas = [
        Proc("-m", "tests.support.replica", db_url, task_name, "2s", env=first_blocks)
        for _ in range(2)
    ]
    victim_pid = None
    try:
        for replica in replicas:
            replica.expect("started")
        # Wait until a replica holds the first tick, then kill it without warning.
        [(killed_slot, victim_pid)] = wait_for(
            lambda: ledger.entries(db_url, task_name), 40, "a replica to win a tick"
        )
        [victim] = [replica for replica in replicas if replica.popen.pid == victim_pid]
        victim.kill()
        wait_for(
            lambda: any(s > killed_slot for s, _ in ledger.entries(db_url, task_name)),
            20,
            "a survivor to run a later tick",
        )
    finally:
        for replica in replicas:  # the survivor exits as told; one that blocks cannot
            if victim_pid is None or replica.popen.pid == victim_pid:
                replica.kill()
            else:
                replica.terminate()
    later = sorted(s for s, _ in ledger.entries(db_url, task_name) if s > killed_slot)
    assert later[0] == killed_slot + 2000, "the tick after the killed one was lost too"
    store = LeaseStore.from_url(db_url)
    runs = {run.slot: run for run in store.history(task_name, limit=50)}
    store.dispose()
    assert runs[killed_slot].outcome == "abandoned"
    assert runs[killed_slot + 2000].outcome == "succeeded"


def stale_cursor(url: str, name: str, hours_ago: int) -> int:
    """Make the task look last run ``hours_ago`` hours ago, as after a long full-fleet outage."""
    store = LeaseStore.from_url(url)
    store.create_tables()
    now_ms = slot_of(datetime.now(timezone.utc))
    slot = (now_ms // HOUR_MS - hours_ago) * HOUR_MS
    lease = won(
        store.acquire(
            AcquireRequest(name=name, slot=slot, ttl=1, holder="before-outage", tolerance=60)
        )
    )
    assert lease is not None
    store.finish(lease, "succeeded")
    set_lease_end(store, name, slot / 1000 + 1)  # that run ended back then
    store.dispose()
    return slot


def test_fleet_restart_catches_up_the_latest_missed_tick_once(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    old = stale_cursor(db_url, task_name, hours_ago=3)
    replicas = [Proc("-m", "tests.support.replica", db_url, task_name, "1h") for _ in range(3)]
    try:
        for replica in replicas:
            replica.expect("started")
        wait_for(lambda: ledger.entries(db_url, task_name), 20, "the catch-up run")
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0, 0, 0]
    entries = ledger.entries(db_url, task_name)
    latest = (old // HOUR_MS + 3) * HOUR_MS
    assert [slot for slot, _ in entries] == [latest]


@pytest.mark.parametrize(
    ("policy", "expected_hours"), [("skip", []), ("latest", [0]), ("all", [-1, 0])]
)
def test_catch_up_policies(
    tmp_path: Path, task_name: str, policy: str, expected_hours: list[int]
) -> None:
    url = url_for("sqlite", tmp_path)
    old = stale_cursor(url, task_name, hours_ago=2)
    seen: list[int] = []
    scheduler = Scheduler(url)
    scheduler.add_task(
        lambda ctx: seen.append(ctx.slot),
        every="1h",
        name=task_name,
        catchup=policy,
        catchup_limit=2,
    )
    with scheduler:
        # start() read the cursor and started any catch-up: wait for it to end
        for thread in threading.enumerate():
            if thread.name.startswith("cronlease-catchup"):
                thread.join(20)
    current = (old // HOUR_MS + 2) * HOUR_MS
    assert seen == [current + h * HOUR_MS for h in expected_hours]


@pytest.fixture
def empty_database(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no cronlease tables at all."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    if backend != "postgresql":
        pytest.skip("cold start is exercised on SQLite and PostgreSQL here")
    # the run's server, without its schema: the new database has only "public"
    base = make_url(url_for("postgresql", tmp_path)).difference_update_query(["options"])
    name = f"cronlease_cold_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(base), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def test_ten_replicas_cold_start_on_an_empty_database(empty_database: str, task_name: str) -> None:
    ledger.setup(empty_database)
    replicas = [Proc("-m", "tests.support.coldstart", empty_database, task_name) for _ in range(10)]
    try:
        for replica in replicas:
            replica.expect("ready", timeout=60)
        for replica in replicas:
            replica.send("go")
        lines = [replica.expect("", timeout=60) for replica in replicas]
        assert lines == ["up"] * 10, lines
        wait_for(lambda: len(ledger.entries(empty_database, task_name)) >= 2, 20, "two ticks")
        for replica in replicas:
            replica.send("stop")
        assert [replica.popen.wait(timeout=60) for replica in replicas] == [0] * 10
    finally:
        for replica in replicas:
            replica.kill()
    for replica in replicas:
        assert "Traceback" not in replica.stderr(), replica.stderr()
    slots = [slot for slot, _ in ledger.entries(empty_database, task_name)]
    assert len(slots) == len(set(slots))


def test_a_restart_does_not_catch_up_ticks_skipped_for_overlap(db_url: str, task_name: str) -> None:
    """Every 1 s, each run 1.5 s: the tick after each run's start is skipped for overlap.

    A replica stopped mid-run, and another started as it exits, must not run
    that skipped tick as a "missed" one: it fell due while the lease was held.
    A tick that fell due after the run ended may be caught up: it lies a run's
    length or more after the run's slot, which the check below allows. (The
    periods are short because the test waits several of them; the property
    holds at any scale.) The replica is stopped in its first run: the run's lease
    row is the cursor catch-up reads, the same after one run as after many.
    """
    ledger.setup(db_url)
    run_seconds = 1.5
    slow = {"CRONLEASE_TEST_RUN_SECONDS": f"{run_seconds}"}
    first = Proc("-m", "tests.support.replica", db_url, task_name, "1s", env=slow)
    second = Proc(
        "-m",
        "tests.support.replica",
        db_url,
        task_name,
        "1s",
        env={**slow, "CRONLEASE_TEST_GO": "1"},
    )
    try:
        first.expect("started", 60)
        second.expect("ready", 60)
        # a run in progress: the tick after its start falls due while it holds the lease
        wait_for(lambda: ledger.entries(db_url, task_name), 60, "a first run")
        assert first.terminate(60) == 0  # it waits for the run, then exits
        second.send("go")
        second.expect("started", 60)
        pid = second.popen.pid
        # a wrong catch-up would be its first run: made at its start, before its first tick
        wait_for(
            lambda: any(p == pid for _, p in ledger.entries(db_url, task_name)), 30, "a run there"
        )
    finally:
        second.kill()  # not its clean exit, which would wait for its run
        first.terminate(60)
    slots = [slot for slot, _ in ledger.entries(db_url, task_name)]
    overlapping = [(a, b) for a, b in itertools.pairwise(slots) if b - a < run_seconds * 1000]
    assert not overlapping, f"ran ticks that fell due during the previous run: {overlapping}"
