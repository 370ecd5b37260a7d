"""``cronlease_deliveries``: the worker-side guard's table, on every backend (design §5.36).

A task id is claimed once: the first claim wins, every later one (a resend, a
redelivery) is refused, also when several processes claim it at once; old
deliveries are forgotten; a database of an earlier version gets the table from
``create_tables``.
"""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa

from cronlease import LeaseStore
from cronlease._lease.schema import deliveries
from tests.support.procs import Proc


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


#: processes racing for each task id, and task ids raced for
RACERS, ROUNDS = 3, 3


def test_concurrent_claims_one_wins(db_url: str, store: LeaseStore) -> None:
    """Several processes (tests/support/claim_worker.py, from the fork server) claim the
    same task id at the same instant, a few times over: exactly one wins each time."""
    racers = [Proc("-m", "tests.support.claim_worker", db_url) for _ in range(RACERS)]
    try:
        for _ in range(ROUNDS):
            for racer in racers:
                racer.expect("ready")
            task_id, start_at = str(uuid.uuid4()), time.time() + 0.3
            for racer in racers:
                racer.send(f"go {task_id} {start_at}")
            answers = sorted(racer.expect("claimed ").split()[1] for racer in racers)
            assert answers == ["False"] * (RACERS - 1) + ["True"], task_id
    finally:
        for racer in racers:
            racer.stop()


def test_an_earlier_database_gets_the_table(store: LeaseStore) -> None:
    with store.engine.begin() as conn:
        deliveries.drop(conn)
    assert not sa.inspect(store.engine).has_table(deliveries.name)
    store.create_tables()
    assert sa.inspect(store.engine).has_table(deliveries.name)
    assert store.claim_delivery(str(uuid.uuid4()), "after-upgrade") is True
