"""Schedules kept in the database, followed by real replica processes on every backend
(docs/design.md §5.37): a row added through the model runs once per tick within one
poll; a change applies from the new schedule's next fire time with no slot twice; a
removed row fires nothing more; a run in progress during an edit is neither interrupted
nor overlapped; a corrupted row costs only itself; a job some replicas do not offer runs
only on those that do. The replicas poll every 0.2 s (tests/support/schedule_replica.py).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cronlease import ScheduleError, Schedules
from cronlease._lease.schema import schedules
from tests.processes.test_cli import Replica, write_config
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, terminate_all, wait_for
from tests.support.schedule_replica import POLL

pytestmark = pytest.mark.slow


@pytest.fixture
def model(db_url: str, task_name: str) -> Iterator[Schedules]:
    ledger.setup(db_url)
    made = Schedules(db_url, namespace=task_name)  # checked against the replicas' jobs
    yield made
    made.close()


@pytest.fixture
def started() -> Iterator[list[Proc]]:
    procs: list[Proc] = []
    yield procs
    terminate_all(procs)  # their shutdowns overlap


def replicas(procs: list[Proc], url: str, namespace: str, *jobs: str) -> list[Proc]:
    """One replica offering each of ``jobs``, all started before any is waited for."""
    made = [Proc("-m", "tests.support.schedule_replica", url, namespace, each) for each in jobs]
    procs.extend(made)
    for proc in made:
        proc.expect("started")
    return made


def slots(url: str, tag: str) -> list[int]:
    return [slot for slot, _ in ledger.entries(url, tag)]


def once_each(found: list[int]) -> None:
    twice = {slot: n for slot, n in Counter(found).items() if n > 1}
    assert not twice, f"slots run more than once: {twice}"


def test_added_changed_and_removed_rows_are_followed_by_two_replicas(
    db_url: str, task_name: str, model: Schedules, started: list[Proc]
) -> None:
    replicas(started, db_url, task_name, "x", "x")
    wait_for(lambda: "x" in model.jobs(), 10, "the replicas' jobs")
    # one row to change, one to remove and a control: the change and the removal are
    # made at once and followed together, each on a row of its own
    tag, removed, control = (f"{task_name}-{n}" for n in ("t", "r", "c"))
    added_at: dict[str, float] = {}
    for name, each in (("t", tag), ("r", removed), ("c", control)):
        added_at[each] = time.time()
        # every 1 s with the grace of a 2 s schedule (1 s): a loaded host does not skip a tick
        model.add(name, job="x", every="1s", grace="1s", kwargs={"tag": each})
    # an odd second among t's runs: a slot the schedule it is changed to (every 2 s)
    # never has; and the row to remove is followed, or its removal would prove nothing
    wait_for(
        lambda: (
            len(found := slots(db_url, tag)) >= 2
            and any(s % 2000 for s in found)
            and slots(db_url, removed)
        ),
        10,
        "two runs every 1 s, and one of the row to remove",
    )
    for each in (tag, removed, control):
        first = wait_for(functools.partial(slots, db_url, each), 5, "the first runs")[0]
        # within one poll, at the schedule's first fire time after it was seen
        # (1 s for the poll's read and the tick's start on a loaded host)
        assert first <= (added_at[each] + POLL + 1.0 + 1.0) * 1000, (each, first, added_at)

    changed_at = time.time()
    model.update("t", every="2s")
    removed_at = time.time()
    model.remove("r")
    after = (changed_at + POLL + 1.0) * 1000
    gone = (removed_at + POLL + 1.0) * 1000
    # the removed row's first fire time after the poll and its margin
    next_fire = (gone // 1000 + 1) * 1000
    # the control schedule proves time passed: a control run 1 s past that fire time
    # means a run of it had a second to show up
    wait_for(
        lambda: (
            len([s for s in slots(db_url, tag) if s > after]) >= 2
            and any(s >= next_fire + 1000 for s in slots(db_url, control))
        ),
        12,
        "two runs at 2 s, and control runs 1 s past the removed row's next fire time",
    )
    found = slots(db_url, tag)
    once_each(found)  # every fire time of the new schedule is one the old one had
    assert any(s % 2000 for s in found if s < changed_at * 1000), (found, changed_at)
    assert all(s % 2000 == 0 for s in found if s > after), (found, changed_at)
    late = [s for s in slots(db_url, removed) if s > gone]
    assert late == [], (late, removed_at)
    once_each(slots(db_url, removed))
    once_each(slots(db_url, control))


def test_a_run_in_progress_during_an_edit_is_not_interrupted_nor_overlapped(
    db_url: str, task_name: str, model: Schedules, started: list[Proc]
) -> None:
    replicas(started, db_url, task_name, "slow", "slow")
    wait_for(lambda: "slow" in model.jobs(), 10, "the replicas' jobs")
    tag = f"{task_name}-slow"
    model.add("s", job="slow", every="1s", kwargs={"tag": tag, "seconds": 2.5})
    wait_for(lambda: slots(db_url, tag), 10, "the long run's start")
    long_slot = slots(db_url, tag)[0]
    model.update("s", kwargs={"tag": tag, "seconds": 0.1})  # while the long run runs
    wait_for(lambda: long_slot in slots(db_url, f"{tag}#end"), 10, "the long run's end")
    # a run that started beside the long one says so at its start (an #overlap entry);
    # the first run after it, started and ended, shows the row runs on after the edit
    wait_for(lambda: len(slots(db_url, f"{tag}#end")) >= 2, 10, "a run of the new arguments")
    assert slots(db_url, f"{tag}#overlap") == []
    once_each(slots(db_url, tag))
    # the long run kept what it was started with: it ran its 2.5 s
    assert slots(db_url, tag)[1] >= long_slot + 2000


def test_a_corrupted_row_costs_only_itself_and_a_job_runs_where_it_is_offered(
    db_url: str, task_name: str, model: Schedules, started: list[Proc]
) -> None:
    good, only_a, bad = (f"{task_name}-{n}" for n in ("good", "a", "bad"))
    writer = Schedules(db_url, namespace=task_name, jobs={"x": _x, "y": _x})
    try:
        # every 1 s with the grace of a 2 s schedule (1 s): a loaded CI host does not
        # skip a tick as late
        for name, job, each in (("good", "x", good), ("only-a", "y", only_a), ("bad", "x", bad)):
            writer.add(name, job=job, every="1s", grace="1s", kwargs={"tag": each})
    finally:
        writer.close()
    with model.store.engine.begin() as conn:
        conn.execute(
            sa.update(schedules)
            .where(schedules.c.name == f"{task_name}:bad")
            .values(kwargs="{garbage")
        )
    a, b = replicas(started, db_url, task_name, "x,y", "x")
    wait_for(lambda: len(slots(db_url, only_a)) >= 4, 15, "four runs of the y schedule")
    wait_for(lambda: len(slots(db_url, good)) >= 4, 5, "four runs of the good schedule")
    found = slots(db_url, good)
    once_each(found)
    assert found == list(range(found[0], found[-1] + 1000, 1000)), found  # every tick
    assert slots(db_url, bad) == []
    assert {pid for _, pid in ledger.entries(db_url, only_a)} == {a.popen.pid}
    for proc in (a, b):
        lines = [line for line in proc.stderr().splitlines() if "is invalid" in line]
        assert len(lines) == 1 and f"{task_name}:bad" in lines[0], proc.stderr()
    assert "does not offer job 'y'" in b.stderr()
    shown = {s.name: s.invalid for s in model.list()}
    assert "JSON" in (shown["bad"] or "") and shown["good"] is None


def _x(ctx: object, tag: str) -> None:
    """The jobs' signature, for a writer without the replicas' code."""


@backend_independent(
    "a [jobs.NAME] table is read and registered in Python, whatever the database",
    covered_by=(
        "processes/test_schedules.py::"
        "test_added_changed_and_removed_rows_are_followed_by_two_replicas"
    ),
    on=("sqlite",),
)
def test_cronlease_run_offers_the_jobs_of_its_config_file(
    tmp_path: Path, backend: str, db_url: str, task_name: str, model: Schedules
) -> None:
    config = write_config(
        tmp_path,
        db_url,
        """
        [scheduler]
        schedule_poll = "0.5s"

        [jobs.record]
        call = "tests.support.role_task:record"
        """,
        namespace=task_name,
    )
    proc = Replica("run", "-c", str(config), cwd=tmp_path)
    try:
        assert proc.holder
        wait_for(lambda: "record" in model.jobs(), 10, "the replica's jobs")
        tag = f"{task_name}-r"
        model.add("r", job="record", every="1s", kwargs={"url": db_url, "name": tag})
        wait_for(lambda: len(slots(db_url, tag)) >= 2, 10, "two runs")
        with pytest.raises(ScheduleError, match="unexpected keyword argument 'nme'"):
            model.add("bad", job="record", every="1s", kwargs={"url": db_url, "nme": tag})
        assert proc.stop() == 0, proc.output
    finally:
        proc.kill()
    assert model.jobs() == {}  # withdrawn at its clean shutdown
