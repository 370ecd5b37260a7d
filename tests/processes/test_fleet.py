"""Work spread across a fleet of real replica processes, counted at the ledger (design §4.4).

Each replica (tests/support/batch_replica.py, tests/support/replica.py) is a
real process; every run appends (task, slot, pid) to the side-effect ledger.
Rendezvous hashing gives each tick a preferred replica and a backup: runs
spread over the members, move to a member that joins, and a preferred
replica killed with SIGKILL costs at most the backup's delay — never a
duplicate, and never more than the tick a kill interrupted. A small fleet made
to behave as a large one (tests/support/fleet_knobs.py: a window of few members
per instant, a slow renewal pace) still runs every tick: the window grows until
its members' workers suffice, and a member killed in a cohort renewing slowly
costs no tick either.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter, defaultdict

import pytest

from cronlease._run.acquisition.membership import PAST_PROMISE, RENEW_SECONDS
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.batch_replica import read_stats, read_unrun
from tests.support.member_rows import member_rows, wait_read_by_all
from tests.support.procs import Proc, terminate_all, wait_for

pytestmark = pytest.mark.slow

TASKS = 24
WINDOW = 6  # slots per measured window
#: a replica that prints its member row's holder (``holder HOLDER``) before ``started``
SAY_HOLDER = {"CRONLEASE_TEST_SAY_HOLDER": "1"}


def _replica(
    db_url: str, prefix: str, tasks: int = TASKS, env: dict[str, str] | None = None
) -> Proc:
    # A ledger connection for each run a replica may start at once (a run waiting to
    # open one outlived its tick on a busy MariaDB), yet four replicas must fit in a
    # shared server's connections: 24 tasks over 3-4 members.
    env = {"CRONLEASE_TEST_LEDGER_POOL": "10", **(env or {})}
    return Proc("-m", "tests.support.batch_replica", db_url, prefix, str(tasks), env=env)


def _started(replica: Proc) -> str:
    """Wait until a replica started with :data:`SAY_HOLDER` runs; its holder id."""
    holder = replica.expect("holder").split()[1]
    replica.expect("started")
    return holder


def _stop(replicas: list[Proc]) -> list[int]:
    """SIGTERM to every replica at once; their exit statuses. Stopped one after another
    (each waiting for its runs: 0.55 s in the window test), two could be gone before the
    others read either leave, and a tick preferring both be tried by nobody while the
    others still ran the task's later ticks (two leaves within a pace, design §4.4)."""
    return terminate_all(replicas)


def _next_slot() -> int:
    return (int(time.time()) + 1) * 1000


def _window(
    db_url: str, prefix: str, start_ms: int, slots: int = WINDOW, tasks: int = TASKS
) -> dict[int, int]:
    """Wait until ``slots`` slots from ``start_ms`` ran for every task; runs per pid in them."""
    end_ms = start_ms + slots * 1000

    def done() -> bool:
        rows = ledger.rows_like(db_url, f"{prefix}-")
        return len({(t, s) for t, s, _ in rows if start_ms <= s < end_ms}) >= tasks * slots

    try:
        wait_for(done, 30 + slots, f"{slots} slots of every task from {start_ms}")
    except AssertionError:
        ran = {(t, s) for t, s, _ in ledger.rows_like(db_url, f"{prefix}-")}
        missing = sorted(
            (f"{prefix}-{i:03d}", s)
            for i in range(tasks)
            for s in range(start_ms, end_ms, 1000)
            if (f"{prefix}-{i:03d}", s) not in ran
        )
        raise AssertionError(f"never ran: {missing[:20]} ({len(missing)} in all)") from None
    return Counter(
        pid for _, slot, pid in ledger.rows_like(db_url, f"{prefix}-") if start_ms <= slot < end_ms
    )


def _assert_shares(runs: dict[int, int], pids: list[int]) -> None:
    fair = sum(runs.values()) / len(pids)
    shares = {pid: runs.get(pid, 0) / fair for pid in pids}
    assert all(0.5 <= share <= 1.5 for share in shares.values()), shares


def _assert_once_each(
    db_url: str,
    prefix: str,
    *,
    interrupted: int | None = None,
    tasks: int = TASKS,
    unrun: dict[tuple[str, int], list[str]] | None = None,
) -> None:
    """Every slot of every task once, from its first to its last; with ``interrupted``
    (a kill's instant, ms), a task may lose the one slot its kill interrupted. ``unrun``:
    why the replicas skipped each tick they did not run (:func:`_unrun`), to show."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for task, slot, _ in ledger.rows_like(db_url, f"{prefix}-"):
        by_task[task].append(slot)
    assert len(by_task) == tasks
    for task, slots in by_task.items():
        counts = Counter(slots)
        assert max(counts.values()) == 1, (task, sorted(s for s, n in counts.items() if n > 1))
        missing = set(range(min(slots), max(slots) + 1000, 1000)) - set(slots)
        if interrupted is not None:  # the tick in flight at the kill, at most
            missing -= {max((s for s in missing if s <= interrupted), default=-1)}
        # a slot no replica says it skipped was left to peers by every one of them
        assert not missing, (task, {s: (unrun or {}).get((task, s), []) for s in sorted(missing)})


def _unrun(replicas: list[Proc]) -> dict[tuple[str, int], list[str]]:
    """Why the replicas (stopped with SIGTERM) skipped the ticks they did not run."""
    reasons: dict[tuple[str, int], list[str]] = defaultdict(list)
    for replica in replicas:
        read_stats(replica)  # the line before
        for tick, reason in read_unrun(replica).items():
            reasons[tick].append(reason)
    return reasons


@backend_independent(
    "which member a tick prefers is rendezvous hashing over the members read, in Python",
    covered_by="contract/test_fleet.py::test_a_renewal_inserts_renews_and_reads_every_live_member, "
    "contract/test_fleet.py::test_a_checked_tick_whose_slot_was_taken_costs_no_acquisition",
)
def test_runs_spread_over_the_fleet_and_move_to_a_member_that_joins(
    db_url: str, task_name: str
) -> None:
    ledger.setup(db_url)
    replicas = [_replica(db_url, task_name, env=SAY_HOLDER) for _ in range(3)]
    try:
        holders = [_started(replica) for replica in replicas]
        pids = [replica.popen.pid for replica in replicas]
        # measured once every member's view has the others: its next membership read
        wait_read_by_all(db_url, holders)
        _assert_shares(_window(db_url, task_name, _next_slot()), pids)
        newcomer = _replica(db_url, task_name, env=SAY_HOLDER)
        replicas.append(newcomer)
        old = list(holders)
        holders.append(_started(newcomer))
        pids.append(newcomer.popen.pid)
        # the others see it at their next membership read: within one renewal period
        wait_read_by_all(db_url, holders, readers=old)
        runs = _window(db_url, task_name, _next_slot())
        _assert_shares(runs, pids)
    finally:
        codes = _stop(replicas)
    assert codes == [0] * 4, [replica.stderr()[-2000:] for replica in replicas]
    _assert_once_each(db_url, task_name)
    stats = [read_stats(replica) for replica in replicas]
    tried = sum(stat["acquire_batch_ticks"] for stat in stats)
    ran = len(ledger.rows_like(db_url, f"{task_name}-"))
    # each tick was sent to acquire_many by about one replica, not by all four
    assert tried <= 1.5 * ran + 4 * TASKS, (tried, ran)


@backend_independent(
    "a dead member's ticks go to their backup by rendezvous hashing, in Python",
    covered_by="contract/test_fleet.py::"
    "test_an_expired_member_is_not_read_and_the_next_renewal_deletes_it, "
    "processes/test_recovery.py::test_killed_holder_costs_only_the_tick_it_interrupted",
)
def test_a_preferred_replica_killed_between_ticks_costs_at_most_the_tick_in_flight(
    db_url: str, task_name: str
) -> None:
    ledger.setup(db_url)
    replicas = [_replica(db_url, task_name, env=SAY_HOLDER) for _ in range(3)]
    try:
        # every member's view has the others (the victim is preferred for its share)
        wait_read_by_all(db_url, [_started(replica) for replica in replicas])
        _window(db_url, task_name, _next_slot(), slots=2)
        # kill -9 half-way between two ticks (the tasks take milliseconds)
        wait_for(lambda: 0.4 < time.time() % 1 < 0.6, 2, "the middle of a second", interval=0.01)
        victim = replicas.pop(0)
        victim.kill()
        killed_ms = int(time.time() * 1000)
        # its ticks go to their backups, the delay late, from the very next tick
        after = _window(db_url, task_name, _next_slot(), slots=WINDOW)
        assert victim.popen.pid not in after
        _assert_shares(after, [replica.popen.pid for replica in replicas])
    finally:
        codes = _stop(replicas)
        for replica in replicas:
            replica.kill()
    assert codes == [0, 0], [replica.stderr()[-2000:] for replica in replicas]
    # no slot lost but, at most, the one a task's run was in when the victim died
    _assert_once_each(db_url, task_name, interrupted=killed_ms)


@backend_independent(
    "the tick after a dead preferred holder is a survivor's late pickup, in Python",
    covered_by="contract/test_fleet.py::test_a_checked_tick_still_free_is_acquired, "
    "processes/test_recovery.py::test_killed_holder_costs_only_the_tick_it_interrupted",
)
def test_a_preferred_replica_killed_mid_run_costs_only_that_run(
    db_url: str, task_name: str
) -> None:
    """Three replicas of one task every 2 s; the first tick's winner blocks in its run
    and is killed then: a survivor runs the very next tick, whichever replica that
    tick prefers (late pickup once the dead run's lease expires), and every later one.
    (The first tick, not a chosen replica's first win: that took as many ticks as the
    victim lost to the others.)"""
    ledger.setup(db_url)
    block = {"CRONLEASE_TEST_BLOCK": "first"}
    replicas = [
        Proc("-m", "tests.support.replica", db_url, task_name, "2s", env=block) for _ in range(3)
    ]
    survivors = replicas
    try:
        # watched from the start: killed at once, before its lease is renewed past the
        # next tick's grace (a survivor's late pickup is the claim)
        killed_slot, victim_pid = wait_for(
            lambda: ledger.entries(db_url, task_name), 30, "the first tick to run"
        )[0]
        (victim,) = (replica for replica in replicas if replica.popen.pid == victim_pid)
        victim.kill()
        survivors = [replica for replica in replicas if replica is not victim]
        for replica in survivors:
            replica.expect("started")
        wait_for(
            lambda: sum(s > killed_slot for s, _ in ledger.entries(db_url, task_name)) >= 3,
            30,
            "three ticks after the kill",
        )
    finally:
        codes = _stop(survivors)
        for replica in replicas:
            replica.kill()
    assert codes == [0, 0], [replica.stderr()[-2000:] for replica in survivors]
    slots = [slot for slot, _ in ledger.entries(db_url, task_name)]
    assert len(slots) == len(set(slots)), "a slot ran twice"
    later = sorted(s for s in slots if s > killed_slot)
    assert later[0] == killed_slot + 2000, "the tick after the killed one was lost too"
    ledger.assert_every_slot_once(slots, step_ms=2000)


@backend_independent(
    "which members an instant is ranked over is decided in Python from the member rows",
    covered_by="contract/test_fleet.py::test_a_renewal_inserts_renews_and_reads_every_live_member",
)
def test_a_window_too_small_for_its_members_workers_grows_until_every_tick_runs(
    db_url: str, task_name: str
) -> None:
    """Four replicas of four tasks with three workers each, the smallest window one
    member, each run working 0.55 s (past the tick's grace, 0.5 s): one member alone
    could run three of an instant's four ticks, and no other would try the last (no
    backup in a window of one). The window grows to ⌈2 x 4 tasks / 3 workers⌉ = 3
    members, and every tick runs once: a tick is skipped only when its preferred
    replica and its backup are both full, six runs for an instant's four ticks.
    (With two workers, a member preferred for three of an instant's ticks leaves one
    to its backup, which starts it a moment later; on a loaded CI machine one such tick
    was once not run within its 0.5 s grace.)"""
    ledger.setup(db_url)
    tasks = 4
    env = {
        "CRONLEASE_TEST_ACTIVE": "1",
        "CRONLEASE_TEST_WORKERS": "3",
        "CRONLEASE_TEST_TASK_SECONDS": "0.55",
    }
    replicas = [_replica(db_url, task_name, tasks, env) for _ in range(4)]
    try:
        for replica in replicas:
            replica.expect("started")
        # settled: every member has read the others (a renewal period), and the change
        # is older than the pace and 4 s (every member checks every tick until then)
        settled = _next_slot() + int(RENEW_SECONDS * 1000) * 4 + 1000
        _window(db_url, task_name, settled, slots=6, tasks=tasks)
    finally:
        codes = _stop(replicas)
    assert codes == [0] * 4, [replica.stderr()[-2000:] for replica in replicas]
    _assert_once_each(db_url, task_name, tasks=tasks, unrun=_unrun(replicas))


@backend_independent(
    "a member's renewal pace is planned in Python from the cohort it read; the row's "
    "expiry is the database clock plus the ttl it asks for",
    covered_by="contract/test_fleet.py::test_a_renewal_inserts_renews_and_reads_every_live_member, "
    "contract/test_fleet.py::test_an_expired_member_is_not_read_and_the_next_renewal_deletes_it",
)
def test_a_large_cohort_renews_at_its_pace_and_a_killed_member_costs_no_tick(
    db_url: str, task_name: str
) -> None:
    """Four replicas behaving as a cohort of 64 does: one renewal a second between them
    (each member every 4 s, not 2 s) and two members per instant. One is killed between
    two ticks: its preferred ticks go to their backups until the survivors see it
    overdue (up to two paces and 2 s), then every member checks until the change
    settles — every tick runs once, but the one in flight at the kill."""
    ledger.setup(db_url)
    rate = 1  # renewals a second, the cohort's
    env = {
        "CRONLEASE_TEST_ACTIVE": "2",
        "CRONLEASE_TEST_RENEWALS_PER_SECOND": str(rate),
        **SAY_HOLDER,
    }
    replicas = [_replica(db_url, task_name, env=env) for _ in range(4)]
    holders = {}
    try:
        for replica in replicas:
            holders[replica.expect("holder").split()[1]] = replica
        for replica in replicas:
            replica.expect("started")
        pace = 4 / rate
        # each row soon promises its next renewal a pace ahead (and lives 4 s past it)
        wait_for(
            lambda: (
                len(rows := member_rows(db_url, holders)) == 4
                and all(e - r > pace + 3.5 for r, e in rows.values())
            ),
            3 * pace,
            lambda: f"member rows at the cohort's pace: {member_rows(db_url, holders)}",
        )
        # and keeps it: watched until every row renewed twice more (two paces)
        seen: dict[str, set[float]] = defaultdict(set)

        def renewed_twice() -> bool:
            for holder, (renewed_at, _) in member_rows(db_url, holders).items():
                seen[holder].add(renewed_at)
            return len(seen) == 4 and all(len(times) >= 3 for times in seen.values())

        wait_for(
            renewed_twice, 3 * pace + 5, lambda: f"two renewals of each: {seen}", interval=0.25
        )
        gaps = [b - a for times in seen.values() for a, b in itertools.pairwise(sorted(times))]
        assert len(gaps) >= 8 and min(gaps) > RENEW_SECONDS + 0.5, sorted(gaps)
        wait_for(lambda: 0.4 < time.time() % 1 < 0.6, 2, "the middle of a second", interval=0.01)
        victim = replicas.pop(0)
        victim.kill()
        killed_ms = int(time.time() * 1000)
        start_ms = _next_slot()
        (gone,) = (holder for holder, replica in holders.items() if replica is victim)
        survivors = [holder for holder in holders if holder != gone]
        # Seen overdue within two paces and 2 s of the kill; its row expires a pace and
        # 4 s after its last renewal, each survivor reads it gone at its first renewal
        # past that (within a pace), and its view settles the cohort's new pace (three
        # members: 3 s) and 4 s after that read. Every tick still runs, watched through
        # the last survivor's settling and an instant past it (and a second for the
        # read's own latency).
        read_gone = _read_gone(db_url, gone, survivors, timeout=3 * pace + 10)
        settled = read_gone + max(RENEW_SECONDS, 3 / rate) + PAST_PROMISE
        end_ms = (math.ceil(settled) + 2) * 1000
        after = _window(db_url, task_name, start_ms, slots=(end_ms - start_ms) // 1000)
        assert victim.popen.pid not in after
    finally:
        codes = _stop(replicas)
        for replica in replicas:
            replica.kill()
    assert codes == [0, 0, 0], [replica.stderr()[-2000:] for replica in replicas]
    _assert_once_each(db_url, task_name, interrupted=killed_ms)


def _read_gone(db_url: str, gone: str, survivors: list[str], timeout: float) -> float:
    """Wait until every survivor has read the fleet without ``gone`` (a killed member):
    renewed after its row expired (a renewal reads the live rows). The latest of those
    first renewals (epoch seconds, the database's clock)."""
    expiry: float | None = None
    first: dict[str, float] = {}

    def read() -> bool:
        nonlocal expiry
        rows = member_rows(db_url, [gone, *survivors])
        if gone in rows:  # until a renewal past its expiry deletes it
            expiry = rows[gone][1]
        for holder in survivors:
            if expiry is not None and holder in rows and rows[holder][0] > expiry:
                first.setdefault(holder, rows[holder][0])
        return len(first) == len(survivors)

    wait_for(read, timeout, lambda: f"{survivors} to read {gone} gone: {first}", interval=0.25)
    return max(first.values())
