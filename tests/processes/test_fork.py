"""Forking: a scheduler made before fork works in the child when started there, or when
it was started before the fork with ``restart_after_fork=True`` (gunicorn
``--preload``); any other forked child (a ``multiprocessing`` pool) runs no ticks."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from cronlease import LeaseStore, RunContext, Scheduler
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow


def child_waits_for_its_own_run(url: str, name: str) -> int:
    """In the child: 0 if a run by this pid reaches the ledger within the deadline."""
    try:
        wait_for(
            lambda: any(pid == os.getpid() for _, pid in ledger.entries(url, name)),
            20,
            "a run in the child",
        )
        return 0
    except BaseException:
        return 1


def fork_and_check(url: str, name: str, scheduler: Scheduler, start_in_child: bool) -> int:
    pid = os.fork()
    if pid == 0:  # the child, as a gunicorn worker would be
        code = 1
        try:
            if start_in_child:
                scheduler.start()
            code = child_waits_for_its_own_run(url, name)
            scheduler.shutdown()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@backend_independent(
    "whether a forked child runs ticks is the pid check in Python; PostgreSQL's sockets are "
    "the connections a child could break",
    covered_by="contract/test_pool.py::"
    "test_a_forked_child_never_closes_the_parents_idle_connections",
)
@pytest.mark.parametrize("started_before_fork", [False, True])
def test_scheduler_runs_in_a_forked_child(
    db_url: str, task_name: str, started_before_fork: bool
) -> None:
    ledger.setup(db_url)
    scheduler = Scheduler(db_url, restart_after_fork=started_before_fork)

    @scheduler.task(every="1s", name=task_name)
    def write_ledger(ctx: RunContext) -> None:
        ledger.append(db_url, task_name, ctx.slot)

    # The parent touches the database first, so it has pooled connections to leak.
    scheduler.runner.ensure_schema()
    parent_holder = scheduler.holder
    if started_before_fork:
        scheduler.start()  # gunicorn --preload: started in the master, before fork
    try:
        assert fork_and_check(db_url, task_name, scheduler, not started_before_fork) == 0
    finally:
        scheduler.shutdown()
    assert scheduler.holder == parent_holder
    slots = [slot for slot, _ in ledger.entries(db_url, task_name)]
    assert len(slots) == len(set(slots))


@backend_independent(
    "a fork pool's children are told from the replica by the pid check in Python",
    covered_by="contract/test_pool.py::"
    "test_a_forked_child_never_closes_the_parents_idle_connections",
)
def test_children_of_a_fork_pool_run_no_ticks(db_url: str, task_name: str) -> None:
    """A ``multiprocessing`` fork Pool in a running replica: its workers are not
    replicas (no ticks in the ledger, none abandoned when the pool closes)."""
    ledger.setup(db_url)
    replica = Proc("-m", "tests.support.fork_pool_replica", db_url, task_name)
    try:
        workers = {int(pid) for pid in replica.expect("pool", 90).split()[1:]}
        replica.expect("done", 60)
    finally:
        code = replica.stop()
    assert code == 0, replica.stderr()
    assert workers and replica.popen.pid not in workers
    pids = {pid for _, pid in ledger.entries(db_url, task_name)}
    assert pids == {replica.popen.pid}, f"pool workers ran ticks: {pids & workers}"
    store = LeaseStore.from_url(db_url)
    try:
        outcomes = {run.outcome for run in store.history(task_name, limit=100)}
    finally:
        store.dispose()
    assert outcomes == {"succeeded"}, outcomes


def child_can_write(path: Path) -> int:
    """In the child: 0 if a write transaction on ``path`` commits within 5 s.

    Plain ``sqlite3``: SQLite keeps its lock bookkeeping per process, for every
    connection to the file, so any new connection in the child (the child's own
    scheduler's, as here) meets what the fork copied."""
    try:
        conn = sqlite3.connect(path, timeout=5, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE cronlease_leases SET paused = paused")
            conn.execute("COMMIT")
        finally:
            conn.close()
        return 0
    except BaseException:
        return 1


def test_a_fork_while_another_thread_writes_to_sqlite_leaves_the_child_able_to_write(
    tmp_path: Path, task_name: str
) -> None:
    """gunicorn ``--preload`` forks workers while the master's scheduler threads write.

    A fork inside another thread's SQLite write transaction copied SQLite's
    per-process lock bookkeeping (this process holds the write lock) into a child
    that holds no lock at all: every write the child tried was refused as busy,
    forever. The fork now waits for the transaction to end. Here a thread holds a
    write transaction open until the fork has happened, or for 1 s at most: the
    fork waits out that second; before, it came at once and the child could not
    write."""
    path = tmp_path / "cronlease.db"
    store = LeaseStore.from_url(f"sqlite:///{path}")
    store.create_tables()
    store.pause(task_name)  # a row to write to
    in_transaction, forked = threading.Event(), threading.Event()

    def write_until_forked() -> None:
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE cronlease_leases SET paused = paused"))
            in_transaction.set()
            forked.wait(1.0)

    writer = threading.Thread(target=write_until_forked)
    writer.start()
    try:
        assert in_transaction.wait(10)
        pid = os.fork()
        if pid == 0:
            os._exit(child_can_write(path))
        forked.set()
        _, status = os.waitpid(pid, 0)
    finally:
        forked.set()
        writer.join()
        store.dispose()
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child could not write the file"
