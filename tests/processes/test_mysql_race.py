"""The MySQL/MariaDB race across real OS processes (tests/support/mysql_race_worker.py).

- Real OS processes released by a start gate race for the same slot, round
  after round, under READ COMMITTED sessions (cronlease's own engine) and
  REPEATABLE READ sessions (a user's engine, also in a non-UTC time zone).
  Wins are counted at a side-effect ledger without a unique constraint.
- A brand-new task name raced by every process at once, and neighbouring
  task names raced together (their winners write neighbouring index entries).

The in-process MySQL/MariaDB tests, and the fixtures used here, are in
tests/contract/test_mysql.py.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from cronlease._lease.store import LeaseStore
from tests.contract import test_mysql
from tests.contract.test_mysql import ODD_TIME_ZONES, ledger_rows, server_slot, unique_name
from tests.support.procs import Proc

PROCESSES = 8
RACE_ROUNDS = 200
NEW_NAME_ROUNDS = 40
NEIGHBOURS = 6
NEIGHBOUR_ROUNDS = 80
# MySQL/MariaDB error 1213 "Deadlock found ...", 1205 "Lock wait timeout exceeded ..."
LOCK_ERRORS = ("deadlock", "lock wait")

# the fixtures of the MySQL suite: its server, store, plain engine and ledger table
mysql_url = test_mysql.mysql_url
store = test_mysql.store
raw = test_mysql.raw
ledger = test_mysql.ledger


def left(deadline: float) -> float:
    """Seconds until ``deadline`` (time.monotonic()), never negative."""
    return max(0.0, deadline - time.monotonic())


class Race:
    """PROCESSES workers (tests/support/mysql_race_worker.py) on one database, released
    together round after round."""

    def __init__(self, tmp_path: Path, url: str, ledger: str, isolation: str, zones: list[str]):
        self.tmp_path = tmp_path
        self.workers = [
            Proc(
                "-m",
                "tests.support.mysql_race_worker",
                url,
                isolation,
                zones[index % len(zones)],
                ledger,
                f"racer-{index}",
            )
            for index in range(PROCESSES)
        ]
        deadline = time.monotonic() + 60
        self.levels = [tuple(worker.expect("", left(deadline)).split()) for worker in self.workers]

    def round(self, slot: int, names: list[str]) -> list[list[str]]:
        """Open the gate for every worker (in random order); outcomes by worker, then task."""
        order = list(self.workers)
        random.shuffle(order)
        for worker in order:
            worker.send(f"go {slot} {' '.join(names)}")
        deadline = time.monotonic() + 30
        answers = [worker.expect("", left(deadline)).split() for worker in self.workers]
        assert all(answer[0] == "done" and len(answer) == len(names) + 1 for answer in answers)
        return [answer[1:] for answer in answers]

    def stop(self) -> list[str]:
        """Stop every worker; the stderr of each (logging included), kept in tmp_path."""
        for worker in self.workers:
            worker.stop()
        stderrs = [worker.stderr() for worker in self.workers]
        for index, err in enumerate(stderrs):
            (self.tmp_path / f"worker-{index}.err").write_text(err)
        return stderrs


def lock_problems(outcomes: list[str], stderrs: list[str]) -> list[str]:
    lines = outcomes + [line for err in stderrs for line in err.splitlines()]
    return [line for line in lines if any(word in line.lower() for word in LOCK_ERRORS)]


def race(
    tmp_path: Path,
    url: str,
    ledger: str,
    isolation: str,
    zones: list[str],
    rounds: list[tuple[int, list[str]]],
) -> dict[tuple[int, str], list[str]]:
    """Run the rounds with PROCESSES workers; the outcomes of each (slot, task), by worker.

    Fails on any error or any deadlock / lock-wait message in any worker's output.
    """
    racers = Race(tmp_path, url, ledger, isolation, zones)
    try:
        assert [level for _, level in racers.levels] == [isolation.replace(" ", "_")] * PROCESSES
        answers = [(slot, names, racers.round(slot, names)) for slot, names in rounds]
    finally:
        stderrs = racers.stop()
    outcomes: dict[tuple[int, str], list[str]] = {}
    for slot, names, by_worker in answers:
        for index, name in enumerate(names):
            outcomes[slot, name] = [worker[index] for worker in by_worker]
    flat = [outcome for by_worker in outcomes.values() for outcome in by_worker]
    errors = [outcome for outcome in flat if outcome.startswith("error")]
    assert not errors, (errors[:5], [err for err in stderrs if err.strip()][:1])
    problems = lock_problems(flat, stderrs)
    assert not problems, problems[:5]
    return outcomes


def winning_fences(outcomes: dict[tuple[int, str], list[str]]) -> dict[tuple[int, str], int]:
    """The fence of each (slot, task)'s one winner; fails unless every round had exactly one."""
    fences = {}
    for key, by_worker in outcomes.items():
        won = [int(outcome.split(":")[1]) for outcome in by_worker if outcome.startswith("won:")]
        assert len(won) == 1 and by_worker.count("lost") == PROCESSES - 1, (key, by_worker)
        fences[key] = won[0]
    return fences


SESSIONS = pytest.mark.parametrize(
    ("isolation", "zones"),
    [("READ COMMITTED", ["+00:00"]), ("REPEATABLE READ", ODD_TIME_ZONES)],
    ids=["read-committed", "repeatable-read"],
)


@pytest.mark.slow
@SESSIONS
def test_processes_race_for_each_slot_one_winner_per_round(
    tmp_path: Path,
    mysql_url: str,
    store: LeaseStore,
    raw: Engine,
    ledger: str,
    isolation: str,
    zones: list[str],
) -> None:
    name = unique_name("race")
    first_slot = server_slot(store)
    slots = [first_slot + index for index in range(RACE_ROUNDS)]
    started = time.monotonic()
    outcomes = race(tmp_path, mysql_url, ledger, isolation, zones, [(s, [name]) for s in slots])
    elapsed = time.monotonic() - started

    fences = [winning_fences(outcomes)[slot, name] for slot in slots]
    assert all(a < b for a, b in itertools.pairwise(fences)), fences
    assert fences == list(range(1, RACE_ROUNDS + 1))  # every acquisition was a round's win
    rows = ledger_rows(raw, ledger)
    assert sorted(slot for _, slot, _, _ in rows) == slots  # once each: no duplicate, none missed
    assert [fence for _, _, fence, _ in rows] == fences
    by_pid = Counter(pid for _, _, _, pid in rows)
    assert len(by_pid) > 1, by_pid  # the race was a race: different processes won
    history = store.history(name, limit=RACE_ROUNDS + 10)
    assert sorted(run.slot for run in history) == slots
    assert {run.outcome for run in history} == {"succeeded"}
    (row,) = store.leases([name])
    assert (row.fence, row.slot) == (RACE_ROUNDS, slots[-1])
    print(
        f"{isolation}: {RACE_ROUNDS} rounds x {PROCESSES} processes in {elapsed:.1f} s;"
        f" wins per process {sorted(by_pid.values(), reverse=True)}"
    )


@pytest.mark.slow
@SESSIONS
def test_processes_race_for_a_brand_new_task(
    tmp_path: Path,
    mysql_url: str,
    store: LeaseStore,
    raw: Engine,
    ledger: str,
    isolation: str,
    zones: list[str],
) -> None:
    names = [unique_name("new") for _ in range(NEW_NAME_ROUNDS)]
    slot = server_slot(store)
    outcomes = race(tmp_path, mysql_url, ledger, isolation, zones, [(slot, [n]) for n in names])

    assert set(winning_fences(outcomes).values()) == {1}
    rows = ledger_rows(raw, ledger)
    assert sorted(task for task, _, _, _ in rows) == sorted(names)
    assert {(slot_, fence) for _, slot_, fence, _ in rows} == {(slot, 1)}
    for info in store.leases(names):
        assert (info.fence, info.slot, info.paused) == (1, slot, False)


@pytest.mark.slow
@SESSIONS
def test_processes_race_for_neighbouring_tasks(
    tmp_path: Path,
    mysql_url: str,
    store: LeaseStore,
    raw: Engine,
    ledger: str,
    isolation: str,
    zones: list[str],
) -> None:
    """Winners of adjacent task names record their runs at the same moment.

    At REPEATABLE READ, marking a task's old runs abandoned would gap-lock the
    runs index up to the next task's first run, where that task's winner is
    inserting: the statements run at READ COMMITTED whatever the session says.
    """
    prefix = unique_name("near")
    names = [f"{prefix}-{index}" for index in range(NEIGHBOURS)]
    first_slot = server_slot(store)
    slots = [first_slot + index for index in range(NEIGHBOUR_ROUNDS)]
    outcomes = race(tmp_path, mysql_url, ledger, isolation, zones, [(s, names) for s in slots])

    fences = winning_fences(outcomes)
    for name in names:
        assert [fences[slot, name] for slot in slots] == list(range(1, NEIGHBOUR_ROUNDS + 1))
    rows = ledger_rows(raw, ledger)
    assert sorted((task, slot) for task, slot, _, _ in rows) == sorted(
        (name, slot) for name in names for slot in slots
    )
