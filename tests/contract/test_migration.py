"""Tables of a version before attempts are upgraded in place by create_tables(), on every
backend, keeping history, also when replicas start at once (docs/design.md §3.9); the
membership table (issue 14) is added beside them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.membership import MemberBeat
from cronlease._lease.model import AttemptRequest, Lease
from cronlease._lease.schema import RUNS_ATTEMPT_KEY, RUNS_SLOT_KEY, members, runs
from cronlease._lease.store import LeaseStore
from tests.conftest import url_for
from tests.support.old_schema import make_old_tables, old_history, old_runs, own_database
from tests.support.procs import Proc, wait_for

SLOTS = [1_700_000_000_000, 1_700_000_060_000, 1_700_000_120_000]


def plain_engine(url: str) -> Engine:
    return create_engine(normalize_url(url), poolclass=NullPool)


def unique_keys(engine: Engine) -> set[str]:
    inspector = inspect(engine)
    names = {c["name"] for c in inspector.get_unique_constraints(runs.name)}
    # MySQL reports unique keys as indexes too; SQLite's unnamed ones as None
    names |= {i["name"] for i in inspector.get_indexes(runs.name) if i.get("unique")}
    return {name for name in names if name}


def assert_upgraded(engine: Engine, name: str, before: list[dict[str, object]]) -> None:
    inspector = inspect(engine)
    assert "attempt" in {c["name"] for c in inspector.get_columns(runs.name)}
    keys = unique_keys(engine)
    assert RUNS_SLOT_KEY not in keys
    if engine.dialect.name != "sqlite":  # SQLite does not name a table's UNIQUE constraint
        assert RUNS_ATTEMPT_KEY in keys
    indexes = {i["name"] for i in inspector.get_indexes(runs.name)}
    assert {"cronlease_runs_started", "cronlease_runs_outcome"} <= indexes
    columns = [runs.c[c.name] for c in old_runs.c]
    with engine.connect() as conn:
        kept = conn.execute(
            select(*columns, runs.c.attempt).where(runs.c.name == name).order_by(runs.c.slot)
        ).all()
    assert [dict(row._mapping) for row in kept] == [{**row, "attempt": 1} for row in before]


@pytest.fixture
def old_url(backend: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    url_for(backend, tmp_path)  # skips when the server is unreachable
    with own_database(backend, str(tmp_path / "old.db")) as url:
        yield url


def test_old_tables_are_upgraded_keeping_history(old_url: str, backend: str) -> None:
    name = "nightly-report"
    before = old_history(name, SLOTS)
    engine = plain_engine(old_url)
    try:
        make_old_tables(engine, before)
        if backend == "sqlite":
            with engine.begin() as conn:  # an index of the user's own survives the rebuild
                conn.exec_driver_sql("CREATE INDEX users_own ON cronlease_runs (outcome)")
        assert members.name not in inspect(engine).get_table_names()
        store = LeaseStore.from_url(old_url)
        try:
            store.create_tables()
            store.create_tables()  # again: nothing left to do
            assert_upgraded(engine, name, before)
            # the membership table of the fleet tick (issue 14) is made beside them
            assert members.name in inspect(engine).get_table_names()
            seen = store.fleet.renew([MemberBeat("upgraded:1", "0123abcd", 5.0)])
            assert [m.holder for m in seen.members] == ["upgraded:1"]
            if backend == "sqlite":
                assert "users_own" in {i["name"] for i in inspect(engine).get_indexes(runs.name)}
            history = store.history(name)
            assert [(r.slot, r.attempt, r.outcome) for r in history] == [
                (SLOTS[2], 1, "failed"),
                (SLOTS[1], 1, "succeeded"),
                (SLOTS[0], 1, "failed"),
            ]
            # a second attempt of an old slot is accepted, attempt 1 twice is refused
            row = {**before[0], "fence": 9, "holder": "new:1#0000000000000009"}
            with engine.begin() as conn:
                conn.execute(runs.insert().values(**row, attempt=2))
            with pytest.raises(IntegrityError), engine.begin() as conn:
                conn.execute(runs.insert().values(**{**row, "fence": 10}, attempt=1))
            # and the store follows the old lease row's last run with attempt 2
            last = before[-1]
            request = AttemptRequest(
                name=name,
                slot=SLOTS[2],
                after_fence=int(last["fence"]),  # type: ignore[call-overload]
                attempt=2,
                ttl=30.0,
                holder="new:1",
            )
            (second,) = store.reacquire_many([request])
            assert isinstance(second, Lease) and second.attempt == 2
        finally:
            store.dispose()
    finally:
        engine.dispose()


WAITING = {
    # a lock on the table a worker waits for
    "postgresql": "SELECT count(*) FROM pg_locks"
    " WHERE relation = 'cronlease_runs'::regclass AND NOT granted",
    "mysql": "SELECT count(*) FROM information_schema.processlist"
    " WHERE db = DATABASE() AND state LIKE 'Waiting for table metadata lock%'",
}
HOLD = {
    "postgresql": "LOCK TABLE cronlease_runs IN SHARE MODE",
    "mysql": "LOCK TABLES cronlease_runs READ",
}


@pytest.mark.parametrize("held", [False, True], ids=["free", "held"])
def test_replicas_upgrading_at_once(old_url: str, backend: str, held: bool) -> None:
    """Three replicas start together. ``held``: the table is locked until all three
    wait for it, so each has seen the old table before any can change it — the race
    the upgrade must survive, made certain (not possible on SQLite, whose every
    transaction is BEGIN IMMEDIATE: the second replica reads only after the first)."""
    if held and backend == "sqlite":
        pytest.skip("SQLite serializes the replicas before they inspect the table")
    name = "hourly"
    before = old_history(name, SLOTS)
    engine = plain_engine(old_url)
    try:
        for _round in range(3 if not held else 1):
            make_old_tables(engine, before)
            workers = [Proc("-m", "tests.support.upgrade_worker", old_url) for _ in range(3)]
            holder = engine.connect() if held else None
            try:
                if holder is not None:
                    holder.begin()
                    holder.exec_driver_sql(HOLD[backend])
                for worker in workers:
                    worker.expect("ready", timeout=60)
                start_at = time.time() + 0.5
                for worker in workers:
                    worker.send(f"go {start_at}")
                if holder is not None:
                    waiting = text(WAITING[backend])
                    with engine.connect() as watch:
                        wait_for(lambda w=watch, q=waiting: w.execute(q).scalar() == 3, timeout=30)
                    if backend == "mysql":
                        holder.exec_driver_sql("UNLOCK TABLES")
                    holder.rollback()
                answers = [worker.expect("done", timeout=60) for worker in workers]
            finally:
                if holder is not None:
                    holder.close()
                for worker in workers:
                    worker.kill()
            assert answers == ["done ok"] * 3, [w.stderr() for w in workers]
            assert_upgraded(engine, name, before)
    finally:
        engine.dispose()
