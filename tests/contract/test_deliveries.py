"""``cronlease_deliveries``: the worker-side guard's table, on every backend (design §5.36).

A task id is claimed once: the first claim wins, every later one (a resend, a
redelivery) is refused, also when several processes claim it at once; old
deliveries are forgotten; a database of an earlier version gets the table from
``create_tables``.
"""

from __future__ import annotations

import multiprocessing
import uuid

import sqlalchemy as sa

from cronlease import LeaseStore
from cronlease._lease.schema import deliveries


def test_a_task_id_is_claimed_once(store: LeaseStore, task_name: str) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert store.claim_delivery(first, task_name) is True
    assert store.claim_delivery(first, task_name) is False
    assert store.claim_delivery(first, "another.task") is False
    assert store.claim_delivery(second, task_name) is True
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(deliveries.c.task_id, deliveries.c.name, deliveries.c.claimed_at).where(
                deliveries.c.task_id.in_([first, second])
            )
        ).all()
    assert sorted(row.task_id for row in rows) == sorted([first, second])
    assert all(row.name == task_name and row.claimed_at > 1e9 for row in rows)


def test_old_deliveries_are_forgotten(store: LeaseStore, task_name: str) -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    store.claim_delivery(old, task_name)
    store.claim_delivery(new, task_name)
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(deliveries)
            .where(deliveries.c.task_id == old)
            .values(claimed_at=deliveries.c.claimed_at - 3600)
        )
    assert store.forget_deliveries(1800) >= 1
    assert store.claim_delivery(old, task_name) is True  # forgotten: a new delivery
    assert store.claim_delivery(new, task_name) is False


def _claim(url: str, task_id: str, start: object, results: object) -> None:
    store = LeaseStore.from_url(url)
    try:
        start.wait(10)  # type: ignore[attr-defined]
        results.put(store.claim_delivery(task_id, "race"))  # type: ignore[attr-defined]
    finally:
        store.dispose()


def test_concurrent_claims_one_wins(db_url: str, store: LeaseStore) -> None:
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    task_id = str(uuid.uuid4())
    workers = [
        context.Process(target=_claim, args=(db_url, task_id, start, results)) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    start.set()
    answers = [results.get(timeout=30) for _ in workers]
    for worker in workers:
        worker.join(10)
    assert sorted(answers) == [False, False, False, True]


def test_an_earlier_database_gets_the_table(store: LeaseStore) -> None:
    with store.engine.begin() as conn:
        deliveries.drop(conn)
    assert not sa.inspect(store.engine).has_table(deliveries.name)
    store.create_tables()
    assert sa.inspect(store.engine).has_table(deliveries.name)
    assert store.claim_delivery(str(uuid.uuid4()), "after-upgrade") is True
