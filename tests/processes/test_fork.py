"""Forking: a scheduler made before fork works in the child when started there, or when
it was started before the fork with ``restart_after_fork=True`` (gunicorn
``--preload``); any other forked child (a ``multiprocessing`` pool) runs no ticks."""

from __future__ import annotations

import os

import pytest

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
