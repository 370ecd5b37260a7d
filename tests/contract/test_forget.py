"""``LeaseStore.forget``: the one deletion of lease rows, on every backend (design §5.15).

A free row goes with its whole run history, in bounded batches; a row a run
holds stays, and so does its history; other tasks' rows and runs are not
touched. Rows and runs are made through the store's own statements.
"""

from __future__ import annotations

import pytest

from cronlease import LeaseStore
from cronlease._lease import forgetting
from cronlease._lease.model import AcquireRequest
from tests.support.attempts import past_slot, record_attempts
from tests.support.leases import won


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
