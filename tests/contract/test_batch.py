"""Batched acquisition: ticks due together on a replica take their leases in one statement.

The contract and multi-process suites run through the batched path already
(the Scheduler's executor uses it); these tests pin what is specific to it:
refusal reasons per task, concurrent overlapping batches without deadlock and
late pickup. Real replica processes with many tasks each, counted at the
side-effect ledger, are in tests/processes/test_batch_replicas.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import datetime, timezone

import pytest

from cronlease import Scheduler
from cronlease._events import TickSkipped
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, Refusal
from cronlease._lease.store import LeaseStore
from cronlease._timing.schedule import time_of_slot
from cronlease.errors import StoreError
from tests.support.procs import wait_for


def now_slot() -> int:
    return int(time.time()) * 1000


def request(name: str, slot: int, *, ttl: float = 5.0, tolerance: float = 0.5) -> AcquireRequest:
    return AcquireRequest(name=name, slot=slot, ttl=ttl, holder="batch-test", tolerance=tolerance)


def test_a_batch_explains_each_refusal(store: LeaseStore, task_name: str) -> None:
    names = [f"{task_name}-{i}" for i in range(5)]
    slot = now_slot()
    first = store.acquire_many([request(name, slot) for name in names[:4]])
    assert all(isinstance(result, Lease) for result in first)
    assert len({result.holder for result in first if isinstance(result, Lease)}) == 4
    store.pause(names[1])
    store.finish(first[2], "succeeded")  # type: ignore[arg-type]
    batch = [
        request(names[0], slot),  # taken: this slot ran already
        request(names[1], slot - 1000),  # paused
        request(names[2], slot + 1),  # released: wins with the next fence
        request(names[3], slot + 1),  # held: the run of `slot` is still going
        request(names[4], slot + 3_600_000),  # future, on a task that never ran
    ]
    results = store.acquire_many(batch)
    assert [getattr(r, "reason", None) for r in results] == [
        "taken",
        "paused",
        None,
        "held",
        "future",
    ]
    assert isinstance(results[2], Lease) and results[2].fence == 2
    held = results[3]
    assert isinstance(held, Refusal) and held.expires_in is not None and 0 < held.expires_in <= 5
    # the winner's run row was written with the acquisition, the refused ones' not
    runs = store.history(names[2])
    assert [(run.slot, run.fence, run.outcome) for run in runs] == [
        (slot + 1, 2, "running"),
        (slot, 1, "succeeded"),
    ]
    assert [run.slot for run in store.history(names[3])] == [slot]
    store.finish_many([FinishRequest.of(results[2], "failed", "boom")])  # type: ignore[arg-type]
    latest = store.history(names[2])[0]
    assert (latest.outcome, latest.error) == ("failed", "boom")
    # released by finish_many: the next slot is free at once
    again = store.acquire_many([request(names[2], slot + 2)])
    assert isinstance(again[0], Lease) and again[0].fence == 3


def test_a_batch_marks_abandoned_runs(store: LeaseStore, task_name: str) -> None:
    slot = now_slot()
    (lease,) = store.acquire_many([request(task_name, slot - 2000, ttl=0.05)])
    assert isinstance(lease, Lease)
    wait_for(
        lambda: isinstance(store.acquire_many([request(task_name, slot)])[0], Lease),
        5,
        "the dead holder's lease to expire",
    )
    outcomes = {run.slot: run.outcome for run in store.history(task_name)}
    assert outcomes == {slot - 2000: "abandoned", slot: "running"}
    store.finish_many(
        [FinishRequest.of(lease, "succeeded", None)]
    )  # the dead holder comes back late
    assert {run.slot: run.outcome for run in store.history(task_name)}[slot - 2000] == "lost"


def test_a_batch_of_many_records_sweeps_and_finishes_each_run(
    store: LeaseStore, task_name: str
) -> None:
    """The many-row forms of the winners' sweep and run rows and of finishing (one
    statement each over the batch on SQLite, not one execution per row): each run row
    as a lone tick's, fenced per row, a late finish recorded lost, a kept lease kept."""
    a, b, c, d = (f"{task_name}-{x}" for x in "abcd")
    slot = now_slot()
    first = store.acquire_many(
        [
            request(a, slot - 2000, ttl=0.05),
            request(b, slot - 2000, ttl=0.05),
            request(c, slot - 2000, ttl=60),
        ]
    )
    assert all(isinstance(r, Lease) for r in first)
    old_a, old_b, old_c = first  # type: ignore[misc]
    wait_for(
        lambda: all(lease.expires_at < store.database_time() for lease in store.leases([a, b])),
        5,
        "the dead holders' leases to expire",
    )
    manual = AcquireRequest(name=d, slot=slot + 7, ttl=60, holder="batch-test", manual=True)
    second = store.acquire_many([request(a, slot), request(b, slot), request(c, slot), manual])
    new_a, new_b, refused_c, new_d = second
    assert isinstance(new_a, Lease) and isinstance(new_b, Lease) and isinstance(new_d, Lease)
    assert isinstance(refused_c, Refusal) and refused_c.reason == "held"
    rows = {lease.name: lease for lease in store.leases([a, b, c, d])}
    for lease in (new_a, new_b):
        runs = store.history(lease.name)
        assert [(r.slot, r.fence, r.outcome, r.manual) for r in runs] == [
            (slot, 2, "running", False),
            (slot - 2000, 1, "abandoned", False),
        ]
        assert runs[0].holder == lease.holder == rows[lease.name].holder
        assert runs[0].scheduled_for == slot / 1000
        assert runs[0].started_at == rows[lease.name].acquired_at
    (manual_run,) = store.history(d)
    assert (manual_run.slot, manual_run.manual, manual_run.fence) == (slot + 7, True, 1)
    assert rows[d].slot == -1  # a manual run keeps (here: makes) the slot cursor untouched
    # the dead holders come back late (their leases are no longer theirs); c keeps its lease
    store.finish_many(
        [
            FinishRequest.of(old_a, "succeeded", None),
            FinishRequest.of(old_b, "failed", "late"),
            FinishRequest.of(old_c, "failed", "boom", release=False),
        ]
    )
    outcomes = {(r.name, r.slot): (r.outcome, r.error) for n in (a, b, c) for r in store.history(n)}
    assert outcomes[a, slot - 2000][0] == "lost" and outcomes[b, slot - 2000][0] == "lost"
    assert outcomes[a, slot] == outcomes[b, slot] == ("running", None)
    assert outcomes[c, slot - 2000] == ("failed", "boom")
    assert [r.expires_at for r in store.leases([a, b, c])] == [
        rows[a].expires_at,
        rows[b].expires_at,
        rows[c].expires_at,
    ]
    assert all(r.finished_at is not None for n in (a, b) for r in store.history(n)[1:])
    store.finish_many(
        [
            FinishRequest.of(new_a, "succeeded", None),
            FinishRequest.of(new_b, "failed", "x" * 3),
            FinishRequest.of(new_d, "succeeded", None),
        ]
    )
    assert [(r.outcome, r.error) for r in (store.history(n)[0] for n in (a, b, d))] == [
        ("succeeded", None),
        ("failed", "xxx"),
        ("succeeded", None),
    ]
    # released: the next slot is free at once for a and b, not for c (kept)
    third = store.acquire_many([request(a, slot + 1), request(b, slot + 1), request(c, slot + 1)])
    assert [type(r) for r in third] == [Lease, Lease, Refusal]


def test_a_batch_names_each_task_once(store: LeaseStore, task_name: str) -> None:
    with pytest.raises(ValueError, match="at most once"):
        store.acquire_many([request(task_name, 1000), request(task_name, 2000)])


@pytest.mark.slow
def test_overlapping_batches_in_any_order_never_deadlock(
    store: LeaseStore, db_url: str, task_name: str
) -> None:
    """Threads race shuffled, overlapping batches; every slot is won exactly once, no errors."""
    names = [f"{task_name}-{i:02d}" for i in range(30)]
    stores = [LeaseStore.from_url(db_url) for _ in range(4)]
    wins: Counter[tuple[str, int]] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()
    base = now_slot() - 60_000
    gate = threading.Barrier(len(stores))

    def race(own: LeaseStore, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for round_ in range(15):
                chosen = rng.sample(names, 20)
                slot = base + round_ * 10
                gate.wait(timeout=30)
                results = own.acquire_many([request(name, slot, ttl=0.001) for name in chosen])
                won = [r for r in results if isinstance(r, Lease)]
                own.finish_many([FinishRequest.of(lease, "succeeded", None) for lease in won])
                with lock:
                    wins.update((lease.name, lease.slot) for lease in won)
        except (StoreError, threading.BrokenBarrierError) as exc:
            errors.append(exc)
            gate.abort()

    threads = [threading.Thread(target=race, args=(s, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for own in stores:
        own.dispose()
    assert not errors, errors
    assert wins and max(wins.values()) == 1, [key for key, n in wins.items() if n > 1]


def test_late_pickup_and_skip_events_on_the_batched_path(db_url: str, task_name: str) -> None:
    """A tick refused as held is retried in a batch when the lease expires; reasons reach events."""
    scheduler = Scheduler(db_url, history_retention=None)
    runs: list[int] = []
    skips: list[TickSkipped] = []
    scheduler.listen(skips.append, TickSkipped)
    paused_name = f"{task_name}-paused"
    slot = now_slot()  # a fire time of both tasks, well within their 5 s grace
    fire_time = time_of_slot(slot).astimezone(timezone.utc)
    task = scheduler.add_task(
        lambda ctx: runs.append(ctx.slot), every="10s", name=task_name, anchor=fire_time
    )
    paused = scheduler.add_task(lambda: None, every="10s", name=paused_name, anchor=fire_time)
    runner = scheduler.runner
    runner.ensure_schema()
    scheduler.store.pause(paused_name)
    # a dead holder's run of the previous slot, with 1 s left on its lease
    dead = scheduler.store.acquire(
        AcquireRequest(name=task_name, slot=slot - 10_000, ttl=1.0, holder="dead", tolerance=5)
    )
    assert isinstance(dead, Lease)
    batch = runner.acquire_ticks([_tick(task, fire_time), _tick(paused, fire_time)])
    assert batch.runs == [] and len(batch.retries) == 1
    due, retry = batch.retries[0]
    assert 0 < due - time.monotonic() <= 1.1
    assert [(s.task, s.reason) for s in skips] == [(paused_name, "paused")]
    wait_for(lambda: time.monotonic() >= due, 5, "the held lease to expire")
    again = runner.acquire_ticks([retry])
    assert len(again.runs) == 1 and again.retries == []
    assert again.runs[0]() == "succeeded"
    assert runs == [slot]
    assert scheduler.stats["late_pickups"] == 1
    # the finisher thread records it (with whatever else ended meanwhile)
    wait_for(
        lambda: (
            [run.outcome for run in scheduler.store.history(task_name)][:2]
            == ["succeeded", "abandoned"]
        ),
        5,
        "the run to be recorded",
    )
    assert scheduler.runner.running == []
    scheduler.runner.close()
    scheduler.store.dispose()


def _tick(task: object, fire_time: datetime) -> object:
    from cronlease._run.timer.ticks import Tick

    return Tick(task, fire_time)  # type: ignore[arg-type]
