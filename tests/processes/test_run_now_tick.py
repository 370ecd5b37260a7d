"""A manual run never costs a scheduled tick (issue 11 item 8; docs/design.md §4.4).

``run_now`` 1.5 s before a tick of a task every 10 s (grace 5 s), the manual
run lasting 3.5 s: the scheduled tick that fell inside it is refused ``held``
and picked up once the manual run ends — on another replica (a real replica
process), and on the replica running the manual run itself. Counted at the
side-effect ledger.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

STEP = 10.0
MANUAL_SECONDS = 3.5
#: the ticks fall on an anchor this far after the test begins (its replica or scheduler
#: has started by then), not on the epoch's ten seconds, up to a whole step away
FIRST_TICK_AFTER = 6


def _anchor() -> float:
    return float(int(time.time()) + FIRST_TICK_AFTER)


def _scheduler(url: str, name: str, anchor: float) -> Scheduler:
    scheduler = Scheduler(url, history_retention=None)
    start = datetime.fromtimestamp(anchor, timezone.utc)

    @scheduler.task(every="10s", name=name, anchor=start)
    def slow(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)
        if ctx.manual:
            time.sleep(MANUAL_SECONDS)

    return scheduler


def _before_next_tick(lead: float, anchor: float) -> int:
    """Wait until ``lead`` seconds before the next tick at least ``lead`` s away; its slot."""
    now = time.time()
    tick = anchor + ((now - anchor) // STEP + 1) * STEP
    if tick - now < lead + 0.3:
        tick += STEP
    wait_for(lambda: time.time() >= tick - lead, STEP + 5, "the moment to trigger")
    return int(tick * 1000)


def _ran(url: str, name: str, slot: int) -> bool:
    return slot in [entry for entry, _ in ledger.entries(url, name)]


@pytest.mark.slow
@backend_independent(
    "a tick refused held is tried again within its grace by the acquirer's timer, in Python",
    covered_by="contract/test_contract.py::test_manual_acquire_is_refused_while_held, "
    "contract/test_contract.py::test_manual_run_of_a_new_task_does_not_consume_a_tick",
)
def test_run_now_on_another_replica_does_not_cost_the_tick(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    anchor = _anchor()
    env = {"CRONLEASE_TEST_ANCHOR": f"{anchor:.0f}"}
    replica = Proc("-m", "tests.support.replica", db_url, task_name, "10s", env=env)
    try:
        replica.expect("started", timeout=60)
        manual = _scheduler(db_url, task_name, anchor)
        slot = _before_next_tick(1.5, anchor)
        assert manual.run_now(task_name) == "succeeded"
        wait_for(lambda: _ran(db_url, task_name, slot), 10, f"the scheduled tick {slot}")
    finally:
        assert replica.terminate() == 0, replica.stderr()[-3000:]
    slots = [entry for entry, _ in ledger.entries(db_url, task_name)]
    assert slots.count(slot) == 1, slots


@pytest.mark.slow
@backend_independent(
    "a tick refused held is tried again within its grace by the acquirer's timer, in Python",
    covered_by="contract/test_contract.py::test_manual_acquire_is_refused_while_held, "
    "contract/test_contract.py::test_manual_run_of_a_new_task_does_not_consume_a_tick",
)
def test_run_now_on_the_same_replica_does_not_cost_the_tick(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    anchor = _anchor()
    scheduler = _scheduler(db_url, task_name, anchor)
    scheduler.start()
    try:
        wait_for(lambda: scheduler.runner.schema_ready, 30, "the schema")
        slot = _before_next_tick(1.5, anchor)
        assert scheduler.run_now(task_name) == "succeeded"
        wait_for(lambda: _ran(db_url, task_name, slot), 10, f"the scheduled tick {slot}")
    finally:
        scheduler.shutdown()
    slots = [entry for entry, _ in ledger.entries(db_url, task_name)]
    assert slots.count(slot) == 1, slots
