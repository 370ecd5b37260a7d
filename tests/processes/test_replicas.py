"""Exactly-once across real OS processes, counted at the side-effect ledger."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import Proc, terminate_all, wait_for

pytestmark = pytest.mark.slow

RACE_ROUNDS = 40


def test_two_processes_race_for_each_tick(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    workers = [Proc("-m", "tests.support.race_worker", db_url, task_name) for _ in range(2)]
    try:
        outcomes: list[list[str]] = []
        for round_number in range(RACE_ROUNDS):
            for worker in workers:
                worker.expect("ready")
            # Both wait on the gate; the tick is "now", as APScheduler would fire it.
            # They leave the gate at one shared instant, and the order the gate
            # opens in alternates, so neither gets a head start every round.
            fire_ms = round(time.time() * 1000)
            start_at = time.time() + 0.05
            for worker in workers if round_number % 2 else reversed(workers):
                worker.send(f"go {fire_ms} {start_at:.6f}")
            outcomes.append([worker.expect("done").split()[1] for worker in workers])
        for worker in workers:
            worker.send("stop")
            assert worker.popen.wait(timeout=30) == 0, worker.stderr()
    finally:
        for worker in workers:
            worker.kill()
    winners_per_round = [sum(outcome == "succeeded" for outcome in round_) for round_ in outcomes]
    assert winners_per_round == [1] * RACE_ROUNDS, outcomes
    entries = ledger.entries(db_url, task_name)
    assert len(entries) == RACE_ROUNDS
    assert len({slot for slot, _ in entries}) == RACE_ROUNDS
    # both processes won some rounds, or the race proved nothing about contention
    assert len({pid for _, pid in entries}) == 2, entries


def test_three_replicas_run_every_slot_exactly_once(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    replicas = [Proc("-m", "tests.support.replica", db_url, task_name) for _ in range(3)]
    try:
        for replica in replicas:
            replica.expect("started")
        # all three replicas are up for every slot from the next one on
        start_ms = slot_of_now()
        wait_for(
            lambda: sum(slot >= start_ms for slot, _ in ledger.entries(db_url, task_name)) >= 10,
            40,
            "ten slots with every replica running",
        )
    finally:
        codes = terminate_all(replicas)  # their shutdowns overlap
    assert codes == [0, 0, 0], [replica.stderr()[-2000:] for replica in replicas]
    slots = [slot for slot, _ in ledger.entries(db_url, task_name)]
    assert sum(slot >= start_ms for slot in slots) >= 10
    assert_every_slot_once(slots)


def slot_of_now() -> int:
    return (round(time.time() * 1000) // 1000 + 1) * 1000


def test_lone_replica_misses_no_slot(db_url: str, task_name: str) -> None:
    slots: list[int] = []
    scheduler = Scheduler(db_url)

    @scheduler.task(every="1s", name=task_name)
    def record(ctx: RunContext) -> None:
        slots.append(ctx.slot)

    scheduler.start()
    try:
        wait_for(lambda: len(slots) >= 10, 30, "ten runs")
    finally:
        scheduler.shutdown()
    assert_every_slot_once(slots)
    assert scheduler.stats["ticks_missed"] == 0
    assert scheduler.stats["ticks_not_acquired"] == 0
    history = scheduler.store.history(task_name, limit=100)
    assert sorted(run.slot for run in history) == sorted(slots)
    assert {run.outcome for run in history} == {"succeeded"}


def test_replicas_started_apart_fire_on_the_same_instants(tmp_path: Path) -> None:
    seen: dict[str, list[int]] = {"a": [], "b": []}
    schedulers = []
    for label in ("a", "b"):
        scheduler = Scheduler(f"sqlite:///{tmp_path / label}.db")
        scheduler.add_task(
            lambda ctx, label=label: seen[label].append(ctx.slot), every="1s", name="aligned"
        )
        scheduler.start()
        schedulers.append(scheduler)
        # start the second replica at another phase of the second
        time.sleep(0.37)  # a deliberate phase offset between the two starts, not a wait
    try:
        wait_for(lambda: len(seen["a"]) >= 3 and len(seen["b"]) >= 3, 20, "three runs each")
    finally:
        for scheduler in schedulers:
            scheduler.shutdown()
    assert all(slot % 1000 == 0 for slot in seen["a"] + seen["b"])
    assert set(seen["a"]) & set(seen["b"]), seen
