"""An idle fleet renews its membership rarely, and a member that dies while idle is
still replaced before its ticks (design §4.4), with real replica processes.

Three replicas (tests/support/idle_replica.py) of ten tasks every minute whose
first instant is some seconds ahead: until shortly before it nothing is due,
so each member row promises its next renewal just before the instant and the
replicas stay silent meanwhile (counted at the member rows themselves: each
renewal writes a new ``renewed_at``). The two replicas ranked first and second
for some of the instant's ticks are killed with SIGKILL while idle: the
survivor, back before the instant, finds their promises broken, and runs every
tick of the instant once, on time. Without the approach before the instant the
survivor's view would still rank the dead pair first for those ticks, and leave
them to them.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable

import pytest
from sqlalchemy import create_engine, delete
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.schema import members
from cronlease._run.acquisition.membership import (
    APPROACH_SECONDS,
    EXPIRE_SECONDS,
    LAST_READ_SECONDS,
    RENEW_SECONDS,
)
from cronlease._run.acquisition.rendezvous import rendezvous_order
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.member_rows import member_rows
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

TASKS = 10
#: the tasks' first instant, this long after every replica's process is up: its start,
#: its renewal 2 s later that promises the approach, an idle window watched (4 s and
#: more: about 6 s, a start or renewal late under load shortens it), and the kill 8 s
#: before the instant
AHEAD = 16


def _forget(db_url: str, holders: Iterable[str]) -> None:
    engine = create_engine(normalize_url(db_url), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(delete(members).where(members.c.holder.in_(list(holders))))
    finally:
        engine.dispose()


@backend_independent(
    "when a member renews is planned in Python from its schedules; the row's expiry is "
    "the database clock plus the ttl it asks for",
    covered_by="contract/test_fleet.py::test_a_renewal_inserts_renews_and_reads_every_live_member, "
    "contract/test_fleet.py::test_an_expired_member_is_not_read_and_the_next_renewal_deletes_it",
)
def test_an_idle_fleet_renews_rarely_and_a_pair_killed_while_idle_is_replaced_on_time(
    db_url: str, task_name: str
) -> None:
    _kill_a_pair_while_idle(db_url, task_name)


@backend_independent(
    "when a member renews is planned in Python from its schedules and its cohort's pace",
    covered_by="contract/test_fleet.py::test_a_renewal_inserts_renews_and_reads_every_live_member, "
    "contract/test_fleet.py::test_an_expired_member_is_not_read_and_the_next_renewal_deletes_it",
)
def test_an_idle_fleet_at_a_slow_pace_still_reads_the_fleet_just_before_the_instant(
    db_url: str, task_name: str
) -> None:
    """The same, in a cohort renewing slowly (every 6 s: a large cohort's pace, with three
    replicas): the approach is a renewal 6 s before the instant and one 2 s before it,
    not one every 2 s — and the last still finds the pair's promises broken. Renewing
    at the pace from the approach on, the survivor's last read before the instant would
    be 6 s before it, when the pair was not overdue yet."""
    due, survivor = _kill_a_pair_while_idle(
        db_url, task_name, {"CRONLEASE_TEST_RENEWALS_PER_SECOND": "0.5"}
    )
    approach = [round(at - due, 1) for at in survivor if due - APPROACH_SECONDS - 1 < at < due]
    # a renewal at the approach's start and one just before the instant, none between
    assert len(approach) == 2, approach
    assert -APPROACH_SECONDS - 1 < approach[0] < -APPROACH_SECONDS + 1, approach
    assert -LAST_READ_SECONDS - 1 < approach[1] < -LAST_READ_SECONDS + 1, approach


def _kill_a_pair_while_idle(
    db_url: str, task_name: str, env: dict[str, str] | None = None
) -> tuple[int, list[float]]:
    """Three idle replicas, two killed while idle: the survivor runs every tick of the
    instant once, on time. The instant (epoch s), and when the survivor renewed."""
    ledger.setup(db_url)
    replicas = [
        Proc("-m", "tests.support.idle_replica", db_url, task_name, str(TASKS), "-", env=env)
        for _ in range(3)
    ]
    by_holder: dict[str, Proc] = {}
    renewals: dict[str, set[float]] = defaultdict(set)
    survivor: Proc | None = None

    def watch() -> dict[str, tuple[float, float]]:
        rows = member_rows(db_url, by_holder)
        for holder, (renewed_at, _) in rows.items():
            renewals[holder].add(renewed_at)
        return rows

    try:
        for replica in replicas:
            by_holder[replica.expect("holder").split()[1]] = replica
        # counted from here, not from the processes' start: that (with their fork
        # server's own, on its first use) took up to 3 s on a loaded machine, and left
        # the idle window below shorter than the 4 s it must be
        due = math.ceil(time.time()) + AHEAD
        for replica in replicas:
            replica.send(f"due {due}")
        for replica in replicas:
            replica.expect("started")
        # each replica's row soon promises its next renewal only shortly before the instant
        wait_for(
            lambda: (
                len(rows := watch()) == 3
                and all(e - r > EXPIRE_SECONDS + 1 for r, e in rows.values())
            ),
            3 * RENEW_SECONDS + 2,
            lambda: f"idle member rows: {member_rows(db_url, by_holder)}",
        )
        # idle until then: watched at the rows, no renewal (every 2 s before)
        quiet_from = {h: max(seen) for h, seen in renewals.items()}
        kill_at = due - APPROACH_SECONDS - RENEW_SECONDS
        wait_for(lambda: watch() is not None and time.time() >= kill_at, AHEAD, "the idle window")
        idle_seconds = kill_at - max(quiet_from.values())
        assert idle_seconds >= 2 * RENEW_SECONDS, idle_seconds  # a window that can fail
        late = {h: sorted(t for t in seen if t > quiet_from[h]) for h, seen in renewals.items()}
        assert not any(late.values()), (idle_seconds, late)
        # the pair ranked first and second for the most ticks of the instant dies now
        slot = due * 1000
        names = [f"{task_name}-{index:03d}" for index in range(TASKS)]
        pairs = Counter(
            frozenset(rendezvous_order(list(by_holder), name, slot)[:2]) for name in names
        )
        victims, theirs = pairs.most_common(1)[0]
        assert theirs >= 1
        for holder in victims:
            by_holder[holder].kill()
        (kept,) = set(by_holder) - victims
        survivor = by_holder[kept]

        def ran() -> list[tuple[str, int, int]]:
            return [row for row in ledger.rows_like(db_url, f"{task_name}-") if row[1] == slot]

        wait_for(
            lambda: watch() and len({t for t, _, _ in ran() if "#" not in t}) == TASKS,
            AHEAD + 10,
            lambda: f"every tick of the instant: ran {sorted(t for t, _, _ in ran())}",
        )
    finally:
        code = survivor.terminate() if survivor is not None else None
        for replica in replicas:
            replica.kill()
        _forget(db_url, by_holder)
    assert survivor is not None and code == 0, survivor and survivor.stderr()[-2000:]
    runs = [(task, pid) for task, _, pid in ran() if "#" not in task]
    assert Counter(task for task, _ in runs) == Counter(names)  # each once
    assert {pid for _, pid in runs} == {survivor.popen.pid}
    lateness = {
        task: slot_ms
        for task, slot_ms, _ in ledger.rows_like(db_url, f"{task_name}-")
        if task.endswith("#late")
    }
    # on time: the backup's delay at most, far within the grace (30 s)
    assert max(lateness.values()) < 1000, lateness
    return due, sorted(renewals[kept])
