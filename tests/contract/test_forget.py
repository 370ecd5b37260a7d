"""``LeaseStore.forget``: the one deletion of lease rows, on every backend (design §5.15).

A free row goes with its whole run history, in bounded batches; a row a run
holds stays, and so does its history; other tasks' rows and runs are not
touched. Rows and runs are made through the store's own statements.
"""

from __future__ import annotations

import time

import pytest

from cronlease import LeaseStore
from cronlease._lease import forgetting
from cronlease._lease.model import AcquireRequest
from cronlease._lease.schema import leases
from tests.support.attempts import past_slot, record_attempts
from tests.support.leases import set_lease_end, won


def test_forget_deletes_free_rows_with_their_history_and_keeps_held_ones(
    store: LeaseStore, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forgetting, "FORGET_BATCH", 2)  # 5 runs: three batches
    gone, held, other = (f"{task_name}-{suffix}" for suffix in ("gone", "held", "other"))
    for slot in range(5):
        record_attempts(store, gone, past_slot(600 - slot), ["succeeded"])
    record_attempts(store, other, past_slot(600), ["failed", "succeeded"])
    record_attempts(store, held, past_slot(600), ["succeeded"])
    running = won(
        store.acquire(AcquireRequest(name=held, slot=past_slot(1), ttl=60, holder="busy"))
    )
    assert running is not None

    assert store.forget([gone, held, f"{task_name}-never"]) == [gone, f"{task_name}-never"]

    assert [row.name for row in store.leases([gone, held, other])] == [held, other]
    assert store.history(gone) == []
    assert len(store.history(held)) == 2 and len(store.history(other)) == 2
    store.finish(running, "succeeded")  # the held run's writes still land
    assert store.forget([held]) == [held] and store.history(held) == []
    assert store.forget([]) == []


def test_a_run_still_running_keeps_its_row_though_its_lease_lapsed(
    store: LeaseStore, task_name: str
) -> None:
    # the heartbeat lapsed in an outage while the run went on: acquisition would
    # not take the row while a run of it is 'running', and neither does forget
    request = AcquireRequest(name=task_name, slot=past_slot(1), ttl=60, holder="h")
    lease = won(store.acquire(request))
    assert lease is not None
    set_lease_end(store, task_name, time.time() - 60)

    assert store.forget([task_name]) == []
    assert [row.name for row in store.leases([task_name])] == [task_name]
    assert [run.outcome for run in store.history(task_name)] == ["running"]


def test_forget_finishes_the_history_a_forget_left_without_its_row(
    store: LeaseStore, task_name: str
) -> None:
    for slot in range(3):
        record_attempts(store, task_name, past_slot(600 - slot), ["succeeded"])
    with store.engine.begin() as conn:  # an earlier forget stopped after the row went
        conn.execute(leases.delete().where(leases.c.name == task_name))

    assert store.forget([task_name]) == [task_name]
    assert store.history(task_name) == []


def test_what_forget_returns_is_what_it_deleted_and_a_recreated_task_keeps_its_runs(
    store: LeaseStore, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_attempts(store, task_name, past_slot(600), ["succeeded"])
    recreated: list[object] = []

    def recreate() -> None:
        # a replica still declaring the task makes a new row, and a run, right after
        # the row went: once, wherever forget looks next
        if not recreated:
            request = AcquireRequest(name=task_name, slot=past_slot(1), ttl=60, holder="new")
            recreated.append(won(store.acquire(request)))

    leases_read, batch = store.leases, forgetting.Forgetting._batch
    monkeypatch.setattr(store, "leases", lambda *a, **k: (recreate(), leases_read(*a, **k))[1])
    monkeypatch.setattr(
        forgetting.Forgetting, "_batch", lambda self, *a: (recreate(), batch(self, *a))[1]
    )

    assert store.forget([task_name]) == [task_name]  # its row was deleted
    assert recreated and recreated[0] is not None
    assert [run.holder.split("#")[0] for run in store.history(task_name)][:1] == ["new"]
