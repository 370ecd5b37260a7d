"""The one check of what a database holds of cronlease's tables, made without writing.

SQLite only: the states are found by inspection (each backend's is SQLAlchemy's,
and the earlier version's columns are tests/contract/test_migration.py's on
every backend); what matters here is that a SQLite path is never created.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine

from cronlease import LeaseStore
from cronlease._lease.table_state import TableState, table_state
from cronlease._status import read_snapshot
from cronlease._status.build import Snapshot
from tests.support.attempts import past_slot
from tests.support.old_schema import make_old_tables, old_history


def test_each_state_is_found_and_a_missing_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        assert table_state(engine) is TableState.NO_FILE
        assert list(tmp_path.iterdir()) == []
        sqlite3.connect(path).close()
        assert table_state(engine) is TableState.NONE
        make_old_tables(engine, old_history("job", [past_slot(60)]))
        assert table_state(engine) is TableState.EARLIER
        assert not TableState.EARLIER.readable and TableState.NONE.readable
    finally:
        engine.dispose()
    store = LeaseStore.from_url(f"sqlite:///{path}")
    store.create_tables()
    assert table_state(store.engine) is TableState.CURRENT
    store.dispose()


def test_the_page_read_of_a_path_with_no_file_is_empty_and_creates_none(tmp_path: Path) -> None:
    # `cronlease web` started in a fresh directory: no none.db, -wal or -shm after
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'none.db'}")
    try:
        assert read_snapshot(store, [], empty_without_tables=True) == Snapshot()
    finally:
        store.dispose()
    assert list(tmp_path.iterdir()) == []
