"""Renewals under faults: an unexpected error, a hung statement, a broken connection.

The heartbeat thread renews every lease of the replica: it must survive any error.

The fault is real: the application's engine (which ``Scheduler(engine=...)``
adopts) has a ``do_connect`` hook that raises ``TypeError`` on the heartbeat
thread for a moment, as a broken driver option or hook would. Not a
``StoreError``: before, it killed the thread, and every lease it renewed was
lost (issue 11, item 9).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from cronlease import LeaseStore, RunContext, Scheduler
from cronlease._lease.database import HEARTBEAT_TIMEOUT, normalize_url
from cronlease._lease.model import AcquireRequest
from cronlease._lease.schema import leases
from cronlease._timing.schedule import slot_of
from cronlease.errors import StoreError
from tests.conftest import url_for
from tests.support.leases import won
from tests.support.procs import wait_for


@pytest.mark.slow
def test_the_heartbeat_thread_survives_an_unexpected_error(
    tmp_path: Path, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = url_for("postgresql", tmp_path)
    # NullPool: every checkout connects, so the fault is met wherever renewals connect.
    app_engine = create_engine(normalize_url(url), poolclass=NullPool)
    broken = threading.Event()
    raised: list[str] = []

    @event.listens_for(app_engine, "do_connect")
    def _fault(*_args: Any) -> None:
        if broken.is_set() and threading.current_thread().name == "cronlease-heartbeat":
            raised.append("TypeError")
            raise TypeError("connect() got an unexpected keyword argument 'sslmode_x'")

    scheduler = Scheduler(engine=app_engine)
    other = LeaseStore.from_url(url)
    release = threading.Event()
    contexts: dict[str, RunContext] = {}

    def long_run(ctx: RunContext) -> None:
        contexts[ctx.name] = ctx
        release.wait(30)

    names = [f"{task_name}-a", f"{task_name}-b"]
    tasks = [scheduler.add_task(long_run, every="1s", lease_ttl=1, name=name) for name in names]
    fire_time = datetime.now(timezone.utc)
    broken.set()
    runners = [
        threading.Thread(target=scheduler.runner.run_tick, args=(task, fire_time)) for task in tasks
    ]
    for runner in runners:
        runner.start()
    try:
        wait_for(lambda: len(contexts) == 2, 10, "both runs to start")
        wait_for(lambda: raised, 10, "a renewal to meet the fault")
        broken.clear()  # the fault passes well within the 1 s TTL
        # Three TTLs later both leases are still held: the thread lived and renews.
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            for name in names:
                later = AcquireRequest(
                    name=name,
                    slot=slot_of(fire_time + timedelta(seconds=1)),
                    ttl=1.0,
                    holder="other-replica",
                    tolerance=3600,
                )
                assert won(other.acquire(later)) is None, f"{name} lost its lease"
            time.sleep(0.1)
        assert not any(ctx.lost for ctx in contexts.values())
    finally:
        broken.clear()
        release.set()
        for runner in runners:
            runner.join(10)
    assert {scheduler.store.history(name)[0].outcome for name in names} == {"succeeded"}
    assert any("renewing leases failed unexpectedly" in r.getMessage() for r in caplog.records)
    other.dispose()
    scheduler.runner.close()
    app_engine.dispose()


def _lock_lease_row(store: LeaseStore, name: str) -> Any:
    """Another session holding the lease row's lock (SQLite: the database's write lock)."""
    conn = create_engine(store.engine.url, poolclass=NullPool).connect()
    if store.engine.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.begin()
        conn.execute(select(leases.c.name).where(leases.c.name == name).with_for_update())
    return conn


@pytest.mark.slow
def test_a_hung_renewal_is_bounded(store: LeaseStore, task_name: str) -> None:
    """A renewal stuck behind a lock fails after HEARTBEAT_TIMEOUT instead of stalling
    every other lease's renewal for as long as the lock is held."""
    slot = int(store.database_time() * 1000) - 60_000
    lease = won(store.acquire(AcquireRequest(name=task_name, slot=slot, ttl=60, holder="h")))
    assert lease is not None
    assert store.heartbeat(lease) is True
    locker = _lock_lease_row(store, task_name)
    outcome: list[object] = []

    def renew() -> None:
        try:
            outcome.append(store.heartbeat(lease))
        except StoreError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=renew)
    try:
        thread.start()
        # Well past HEARTBEAT_TIMEOUT, well before the lock is let go.
        wait_for(lambda: outcome, 4 * HEARTBEAT_TIMEOUT, "the renewal to give up")
    finally:
        locker.rollback()
        locker.close()
        thread.join(60)
    assert isinstance(outcome[0], StoreError), outcome
    assert store.heartbeat(lease) is True  # and it works again once the lock is gone


def test_renewals_reconnect_after_their_connection_breaks(tmp_path: Path, task_name: str) -> None:
    url = url_for("postgresql", tmp_path)
    store = LeaseStore.from_url(url)
    try:
        store.create_tables()  # the first test of its process on the run's schema, maybe
        slot = int(store.database_time() * 1000) - 60_000
        request = AcquireRequest(name=task_name, slot=slot, ttl=60, holder="h")
        lease = won(store.acquire(request))
        assert lease is not None and store.heartbeat(lease) is True
        with store.heartbeat_engine.connect() as conn:
            backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with store.engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})")
        # The renewal connection is pinged and made anew: the renewal just works.
        assert store.heartbeat(lease) is True
        with store.heartbeat_engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != backend
            # same settings as the store's engine: its schema; and no session setting of
            # its own (the renewal's bound is a SET LOCAL sent with it: it would stay on
            # a server connection PgBouncer hands to others)
            renewal_timeout = conn.exec_driver_sql("SHOW statement_timeout").scalar_one()
            with store.engine.connect() as other:
                assert renewal_timeout == other.exec_driver_sql("SHOW statement_timeout").scalar()
            assert conn.exec_driver_sql("SHOW search_path").scalar_one() == str(
                make_url(url).query["options"]
            ).removeprefix("-csearch_path=")
    finally:
        store.dispose()
