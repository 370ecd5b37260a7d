"""Fenced side effects, the stuck watcher and a fleet-wide crash, with real replica
processes (issue 13; the plain kill -9 recovery is test_attempt_recovery.py).

Replicas are ``tests/support/stale_replica.py`` processes; every effect is a
ledger row written in the same transaction as ``ctx.verify(connection)``, so
the ledger counts committed effects, not reported outcomes.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping.attempt_poll import ATTEMPTS_PER_PASS, POLL_SECONDS
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

TTL = 2.0
#: how long after a test spawns its replicas, at least, their schedule's first tick
#: falls (its anchor, on the next whole second): a replica forked from the fork server
#: has started within a few tenths of a second; one that starts later only joins the
#: fleet late (each test needs one replica at its first tick, the others only after
#: it), and if none has started, the first tick is the next period's, as with no anchor
FIRST_TICK_AFTER = 1.5


def soon() -> str:
    """An anchor for a test's replicas: its first tick ``FIRST_TICK_AFTER`` s from now
    or up to a second later (a whole second)."""
    return str(math.ceil(time.time() + FIRST_TICK_AFTER))


RUNNING = re.compile(r"running (\S+) slot=(\d+) attempt=(\d+) recovering=(\w+) key=(\S+)")


def spawn(url: str, prefix: str, count: int, n: int, **env: str) -> list[Proc]:
    """``n`` replicas of ``count`` tasks ``PREFIX-i``, started: see :func:`replicas`."""
    settings = {
        "CRONLEASE_TEST_TTL": f"{TTL:g}s",
        **{f"CRONLEASE_TEST_{k.upper()}": v for k, v in env.items()},
    }
    return [
        Proc("-m", "tests.support.stale_replica", url, prefix, str(count), env=settings)
        for _ in range(n)
    ]


def replicas(url: str, prefix: str, count: int, n: int, **env: str) -> list[Proc]:
    """:func:`spawn`, then each one's ``started`` (they start at once, not one by one)."""
    procs = spawn(url, prefix, count, n, **env)
    for proc in procs:
        proc.expect("started")
    return procs


def runs_seen(procs: list[Proc]) -> Iterator[tuple[Proc, str, int, int, bool, str]]:
    for proc in procs:
        for line in proc.drain():
            match = RUNNING.match(line)
            if match:
                name, slot, attempt, recovering, key = match.groups()
                yield proc, name, int(slot), int(attempt), recovering == "True", key


def lines(procs: list[Proc], prefix: str) -> list[str]:
    return [line for proc in procs for line in proc.drain() if line.startswith(prefix)]


@pytest.fixture
def lease_store(db_url: str) -> Iterator[LeaseStore]:
    store = LeaseStore.from_url(db_url)
    store.create_tables()
    ledger.setup(db_url)
    yield store
    store.dispose()


def stop_all(procs: list[Proc]) -> None:
    for proc in procs:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.popen.pid, signal.SIGCONT)
            proc.kill()


def test_a_stale_attempt_cannot_commit_after_recovery(
    db_url: str, lease_store: LeaseStore, task_name: str
) -> None:
    # A replica SIGSTOPped between a lease statement and its COMMIT (a separate request
    # on MySQL/MariaDB; the stuck watcher's and the attempts' transactions elsewhere) kept
    # the lease row locked until its connection ended, and no survivor could recover
    # the slot (one clean-clone run in four on MariaDB): the server now ends a session
    # idle in a transaction after IDLE_IN_TRANSACTION_TIMEOUT (test_idle_transactions.py).
    # every 8 s, not the replica's 15 s: the recovery is due within TTL + a poll of the
    # SIGSTOP, long before the next fire time, and the test waits for the first tick.
    # The holder's first attempt waits for a "resume" line (it was a fixed 4 s sleep that
    # had to outlast the SIGSTOP): the stale attempt resumes, SIGCONTed and told to,
    # once the recovery has committed, and not a second later.
    procs = replicas(db_url, task_name, 1, 3, hold="resume", every="8s", anchor=soon())
    try:
        holder, name, slot, _, _, _ = wait_for(
            lambda: next(iter(runs_seen(procs)), None), 40, "a first attempt"
        )
        os.kill(holder.popen.pid, signal.SIGSTOP)  # it waits in the task: before any write
        survivors = [proc for proc in procs if proc is not holder]
        wait_for(
            lambda: lines(survivors, f"committed {name} slot={slot} attempt=2"),
            TTL + 10,
            "the recovery's commit",
        )
        os.kill(holder.popen.pid, signal.SIGCONT)
        holder.send("resume")
        wait_for(
            lambda: lines([holder], f"refused {name} slot={slot} attempt=1 LeaseLostError"),
            20,
            "the stale attempt refused",
        )
        rows = [pid for s, pid in ledger.entries(db_url, name) if s == slot]
        assert rows == [survivor_pid(survivors, name, slot)], "one committed effect per slot"
    finally:
        stop_all(procs)


def survivor_pid(procs: list[Proc], name: str, slot: int) -> int:
    [proc] = [
        p
        for p in procs
        if any(line.startswith(f"committed {name} slot={slot} ") for line in p.output)
    ]
    return proc.popen.pid


def test_the_watcher_abandons_a_paused_tasks_dead_run(
    db_url: str, lease_store: LeaseStore, task_name: str
) -> None:
    """The watcher's schedule is not the point, so it runs every second instead of every
    minute (its own lease row, in a namespace of the test's own): the CI minute of
    waiting for its pass, on each backend, was most of this test. Its replica starts
    with the holder: its passes mark nothing while the holder lives and renews. The
    holder's task fires every second with the shortest lease (1 s), so its run starts
    and, once it is killed, expires within a second each."""
    holder = spawn(db_url, task_name, 1, 1, hold="block", recover="0", every="1s", ttl="1s")
    # a replica that does not declare the task and whose tasks ask for no attempts:
    # every scheduler runs the fleet-wide watcher, whose pass marks other
    # namespaces' runs too (one with no task asking for attempts had none)
    others = spawn(
        db_url, "other", 1, 1, every="1h", namespace=task_name, watch_every="1s", recover="0"
    )
    name = f"{task_name}-0"
    try:
        for proc in holder + others:
            proc.expect("started")
        wait_for(lambda: next(iter(runs_seen(holder)), None), 20, "a first attempt")
        holder[0].kill()
        lease_store.pause(name)
        [fence_then] = [lease.fence for lease in lease_store.leases([name])]
        wait_for(
            lambda: lease_store.history(name)[0].outcome == "abandoned",
            30,
            "the dead run marked abandoned by the watcher",
        )
        [lease] = lease_store.leases([name])
        assert lease.paused and lease.fence == fence_then, "the task was never acquired"
    finally:
        stop_all(holder + others)


def test_a_crash_of_every_replica_recovers_each_slot_once(
    db_url: str, lease_store: LeaseStore, task_name: str
) -> None:
    restarts = 4
    # twice what the restarted replicas' first passes may start together: each of them
    # needs several passes, and each pass has more candidates than it may start
    tasks = 2 * restarts * ATTEMPTS_PER_PASS
    anchor = soon()  # the restarted replicas' schedule is the crashed ones'
    crashed = replicas(
        db_url, task_name, tasks, 2, hold="block", workers="128", every="20s", anchor=anchor
    )
    restarted: list[Proc] = []
    try:
        wait_for(lambda: len(list(runs_seen(crashed))) >= tasks, 40, "every task in flight")
        in_flight = {(name, slot) for _, name, slot, _, _, _ in runs_seen(crashed)}
        assert len(in_flight) == tasks
        for proc in crashed:
            proc.kill()
        # four, racing for the same oldest candidates: each pass of each starts at most
        # ATTEMPTS_PER_PASS, so the recoveries take several passes of each (with two,
        # twice as many passes: more waiting)
        restarted = replicas(
            db_url,
            task_name,
            tasks,
            restarts,
            workers="128",
            every="20s",
            work="0.3",
            anchor=anchor,
        )
        wait_for(
            lambda: (
                len({(n, s) for _, n, s, a, _, _ in runs_seen(restarted) if a == 2} & in_flight)
                >= tasks
            ),
            30,
            "every slot recovered",
        )
        committed = re.compile(r"committed (\S+) slot=(\d+) attempt=2")

        def commits() -> set[tuple[str, int]]:
            found = {
                m.groups()
                for line in lines(restarted, "committed ")
                if (m := committed.match(line))
            }
            return {(name, int(slot)) for name, slot in found} & in_flight

        wait_for(lambda: len(commits()) >= tasks, 30, "every recovery committed")
        effects = Counter((name, slot) for name, slot, _ in ledger.rows_like(db_url, task_name))
        wrong = {run: effects[run] for run in in_flight if effects[run] != 1}
        assert not wrong, f"committed effects per slot, not once: {wrong}"
        # started together: one pass's attempts share one transaction's start time, and
        # passes are at least POLL_SECONDS apart
        starts: dict[str, list[float]] = {}
        recent = lease_store.recent_runs(sorted({name for name, _ in in_flight}), limit=2)
        for name, slot in in_flight:
            [run] = [r for r in recent[name] if r.slot == slot and r.attempt == 2]
            starts.setdefault(run.holder.split("#")[0], []).append(run.started_at)
        assert len(starts) >= 1
        for holder, times in starts.items():
            times.sort()
            together, most = 1, 1
            for earlier, later in itertools.pairwise(times):
                together = together + 1 if later - earlier < POLL_SECONDS / 5 else 1
                most = max(most, together)
            assert most <= ATTEMPTS_PER_PASS, f"{holder} started {most} attempts together"
    finally:
        stop_all(crashed + restarted)


@backend_independent(
    "the backoff and the count of attempts are the attempt poll's arithmetic, in Python",
    covered_by="contract/test_retries.py::"
    "test_failing_twice_then_succeeding_runs_attempts_one_to_three, "
    "contract/test_attempts.py::test_retry_after_a_failure_is_granted_with_the_next_fence",
)
@pytest.mark.parametrize("retries", [2, 1])
def test_a_failing_task_is_retried_by_the_fleet_with_backoff(
    db_url: str, lease_store: LeaseStore, task_name: str, retries: int
) -> None:
    # every 4 s: the chain of attempts (0.25 s + 0.5 s of backoff, two polls, three runs)
    # fits before the next fire time with seconds to spare on a loaded CI host, and so
    # does one attempt too many (1 s of backoff more), which the test would see; it waits
    # about a period and a half (the first tick, soon, then the one that ends it)
    delay = 0.25
    procs = replicas(
        db_url,
        task_name,
        1,
        3,
        recover="0",
        every="4s",
        anchor=soon(),
        fail_below="3",
        retries=str(retries),
        retry_delay=f"{delay}s",
    )
    name = f"{task_name}-0"
    try:
        first = wait_for(lambda: next(iter(runs_seen(procs)), None), 25, "a first attempt")
        slot = first[2]

        def attempts() -> list[object]:
            runs = sorted(
                (r for r in lease_store.history(name) if r.slot == slot), key=lambda r: r.attempt
            )
            return runs if runs and runs[-1].outcome != "running" else []

        expected = ["failed", "failed", "succeeded"][: retries + 1]
        runs = wait_for(
            lambda: (found := attempts()) and len(found) == retries + 1 and found, 20, "attempts"
        )
        assert [run.attempt for run in runs] == list(range(1, retries + 2))
        assert [run.outcome for run in runs] == expected
        assert [run.fence for run in runs] == sorted({run.fence for run in runs})
        for earlier, later in itertools.pairwise(runs):
            assert earlier.finished_at is not None
            # the backoff, counted on the database clock; jitter only adds to it
            assert (
                later.started_at - earlier.finished_at >= delay * 2 ** (earlier.attempt - 1) - 0.01
            )
        # one effect per attempt at the ledger: no attempt ran twice
        assert Counter(s for s, _ in ledger.entries(db_url, name))[slot] == retries + 1
        # and no further attempt once the retries are spent, before the next tick
        wait_for(
            lambda: next((run for run in runs_seen(procs) if run[2] > slot), None), 15, "next tick"
        )
        later_attempts = sorted(r.attempt for r in lease_store.history(name) if r.slot == slot)
        assert later_attempts == list(range(1, retries + 2))
    finally:
        stop_all(procs)
