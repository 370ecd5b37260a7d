"""A replica whose wall clock steps about +1 h and back keeps firing; nothing runs twice or early.

Three replica processes on one database; libfaketime steps the wall clock of
one of them at run time (an offset file it re-reads at every call), leaving
its monotonic clock alone, as NTP, a VM restore or ``date -s`` would. On
SQLite all three are stepped: a SQLite file's replicas share a host and its
clock, and the lease statement's ``julianday('now')`` is the stepped
process's own (one stepped process alone is a split no deployment can have).

The ledger records the database clock at each run's start (the writer's
query, not its faked wall clock): a slot may lie at most its tolerance ahead
of it. One exception, on SQLite only: a run acquired just before the host's
clock stepped back and started just after reads the stepped-back clock; it
was on time by the clock it was acquired on (an hour later). Times are DOUBLE
columns: MariaDB's FLOAT is single precision, 128 s apart at today's epoch.

The proof that the timer does not oversleep: the stepped replica decides a
tick of the new time within seconds of each step (before the fix, after the
step back it slept for the hour its jobs' next run times had moved away), and
on a server database its own task (no other replica declares it) runs again.
"""

from __future__ import annotations

import glob
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cronlease._timing.schedule import Schedule, time_of_slot
from tests.support import stepped_replica
from tests.support.backends import backend_independent
from tests.support.procs import Proc, terminate_all, wait_for

pytestmark = pytest.mark.slow

LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
HOUR = 3600.0
#: the stepped clock lands this many seconds before a minute, so the cron task's tick
#: falls while it is ahead without waiting up to a minute for one
BEFORE_THE_MINUTE = 4
#: how soon after a step the stepped replica must decide a tick of the new time
#: (its timer wakes every second; the bug it guards against costs the whole hour)
REFIRE_WITHIN = 10.0
TICK_LINE = re.compile(r"TICK (\S+) (\d+) (\S+)")


class SteppedClock:
    """A wall-clock offset that libfaketime reads afresh at every time call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(0)

    def set(self, offset: float) -> None:
        # written whole then renamed: a reader never sees a half-written offset
        fresh = self.path.with_suffix(".new")
        fresh.write_text(f"{offset:+.0f}\n")
        os.replace(fresh, self.path)

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": LIBFAKETIME[0],
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "DONT_FAKE_MONOTONIC": "1",  # timers keep the real monotonic clock
        }


def decided(replica: Proc, tasks: set[str]) -> list[tuple[str, int, str]]:
    """(task, slot, outcome) of every tick of ``tasks`` the replica decided so far."""
    found = (TICK_LINE.search(line) for line in replica.stderr().splitlines())
    return [(m.group(1), int(m.group(2)), m.group(3)) for m in found if m and m.group(1) in tasks]


def wait_decided(
    replica: Proc, tasks: set[str], wanted: Callable[[int], bool], timeout: float, what: str
) -> list[tuple[str, int, str]]:
    return wait_for(
        lambda: [tick for tick in decided(replica, tasks) if wanted(tick[1])],
        timeout,
        what,
        interval=0.1,
    )


@pytest.mark.skipif(
    not LIBFAKETIME,
    reason="libfaketime is not installed (Debian package 'faketime'; .ci/run installs it)",
)
@backend_independent(
    "step detection, the timer and the refire are the replica's; SQLite is its own clock, "
    "PostgreSQL a server's",
    covered_by="contract/test_contract.py::test_future_slot_is_refused, "
    "contract/test_log_streaks.py::"
    "test_slots_ahead_of_the_database_clock_are_logged_once_per_streak",
    on=("sqlite", "postgresql"),
)
def test_a_replica_stepped_forward_and_back_refires_at_once_and_never_early_or_twice(
    backend: str, db_url: str, task_name: str, tmp_path: Path
) -> None:
    """On SQLite and PostgreSQL.

    What the server does here is refuse a slot ahead of its own clock and keep
    the cursor, proven on every backend by tests/contract/test_contract.py
    (test_future_slot_is_refused, test_future_slot_is_refused_on_a_new_task) and
    its log by tests/contract/test_log_streaks.py
    (test_slots_ahead_of_the_database_clock_are_logged_once_per_streak); the
    step detection, the timer and the refire are the replica's (_run/housekeeping/clock_watch.py,
    _timing), the same code on every backend.
    """
    stepped_replica.setup(db_url)
    every, cron, solo = (f"{task_name}-{kind}" for kind in ("every", "cron", "solo"))
    one_host = db_url.startswith("sqlite")
    clock = SteppedClock(tmp_path / "faketime.rc")
    args = ("-m", "tests.support.stepped_replica", db_url, task_name)
    stepped = Proc(*args, env={**clock.env(), "CRONLEASE_TEST_SOLO": "1"})
    others = [Proc(*args, env=clock.env() if one_host else None) for _ in range(2)]
    replicas = [stepped, *others]
    own = {every, solo}
    try:
        for replica in replicas:
            replica.expect("started")
        wait_for(lambda: stepped_replica.entries(db_url, every), 30, "a run")
        # its timer has made a pass, so its step watch has a reading from before the step:
        # the other replicas' runs do not show that, and a replica starved of CPU said
        # "started" seconds before its timer's first pass, then saw no step forward (that
        # pass is what the step watch needs: waiting for more runs first only took seconds)
        wait_decided(stepped, own, lambda slot: True, 30, "a tick the stepped replica decided")

        # an hour and some seconds ahead, landing a few seconds before a minute
        forward_at = time.time()
        step = HOUR + (60 - BEFORE_THE_MINUTE - forward_at % 60) % 60
        clock.set(step)
        new_time = (forward_at + step - 2) * 1000
        wait_decided(stepped, own, lambda s: s >= new_time, REFIRE_WITHIN, "a tick after +1 h")
        # a cron tick falls while the clock is ahead: the stepped replica's timer fires it
        # (on a server database it is refused as from the future: the fleet's real minute
        # is its own); on SQLite, where the host's clock is the database's, it runs
        wait_decided(stepped, {cron}, lambda s: s >= new_time, 30, "a * * * * * tick ahead")
        if one_host:
            wait_for(lambda: stepped_replica.entries(db_url, cron), 30, "a * * * * * run")
        wait_decided(stepped, own, lambda s: s >= new_time + 2000, 10, "ticks after +1 h")
        ahead_for = time.time() - forward_at

        back_at, back_from = time.time(), time.monotonic()
        clock.set(0)
        back_until = time.monotonic()
        now_again = (back_at - 2) * 1000

        def of_the_real_time(slot: int) -> bool:
            return now_again <= slot < now_again + HOUR * 500

        wait_decided(stepped, own, of_the_real_time, REFIRE_WITHIN, "a tick after -1 h")
        if not one_host:
            # its own task runs again: nothing else fires it
            wait_for(
                lambda: [s for s, *_ in stepped_replica.entries(db_url, solo) if s >= now_again],
                REFIRE_WITHIN,
                "a run of the stepped replica's own task after -1 h",
            )
            wait_for(
                lambda: (
                    sum(s >= now_again for s, *_ in stepped_replica.entries(db_url, every)) >= 3
                ),
                20,
                "three runs after -1 h",
            )
    finally:
        codes = terminate_all(replicas)  # their shutdowns overlap
    assert codes == [0, 0, 0], [replica.stderr()[-3000:] for replica in replicas]

    for name, schedule in ((every, Schedule.every("1s")), (cron, Schedule.cron("* * * * *"))):
        runs = stepped_replica.entries(db_url, name)
        duplicates = {slot: n for slot, n in Counter(s for s, *_ in runs).items() if n > 1}
        assert not duplicates, f"{name}: slots run more than once: {duplicates}"
        for slot, pid, db_time, started in runs:
            ahead = slot / 1000 - db_time
            tolerance = schedule.tolerance(time_of_slot(slot))
            acquired_before_the_step_back = (
                one_host
                and back_from <= started <= back_until + REFIRE_WITHIN
                and ahead - step <= tolerance
            )
            assert ahead <= tolerance or acquired_before_the_step_back, (
                f"{name}: slot {slot} ran {ahead:.1f} s early (pid {pid}, its database clock "
                f"read {started - back_from:+.3f} s from the step back)"
            )
    solo_runs = [slot for slot, *_ in stepped_replica.entries(db_url, solo)]
    assert len(solo_runs) == len(set(solo_runs))

    told = stepped.stderr()
    # measured between two reads of two clocks: a loaded host can put some milliseconds
    # between them (+3599.9 s was said once in CI)
    steps = [float(x) for x in re.findall(r"this host's wall clock stepped ([-+][\d.]+) s", told)]
    assert any(abs(x - step) < 2 for x in steps), (steps, told[-3000:])
    assert any(abs(x + step) < 2 for x in steps), (steps, told[-3000:])
    if not one_host:  # refused as from the future, and told why
        assert "the rest of the fleet runs it on time" in told, told[-3000:]

    # No burst through the hour stepped over: the stepped replica decided about one tick
    # per second of each task while it was ahead, not the 3,600 the hour held.
    ahead = {(t, s) for t, s, _ in decided(stepped, own) if s >= new_time}
    assert len(ahead) <= len(own) * (ahead_for + 3), sorted(ahead)[:10]
