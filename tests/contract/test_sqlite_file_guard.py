"""The SQLite file guard on one store: what a replica's statements do once the path moved on.

The fleet-level proof (processes, a ledger) is tests/processes/test_sqlite_file.py;
here each statement is checked on a real file (docs/design.md §5.17).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cronlease import DatabaseFileChanged, LeaseStore, StoreError
from cronlease._lease.model import AcquireRequest
from tests.support.leases import won


def request(name: str, slot: int) -> AcquireRequest:
    return AcquireRequest(name=name, slot=slot, ttl=30, holder="guard", tolerance=1e9)


def test_a_file_moved_away_refuses_leases_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    store = LeaseStore.from_url(f"sqlite:///{path}")
    try:
        store.create_tables()
        lease = won(store.acquire(request("t", 1000)))
        assert lease is not None
        aside = tmp_path / "aside.db"
        os.rename(path, aside)
        path.write_bytes(b"")  # another (empty) file at the path

        with pytest.raises(DatabaseFileChanged, match="deleted or replaced"):
            store.acquire(request("t", 2000))
        # A connection opened now (the pooled one is busy) would open the other file:
        # refused as it opens, so a renewal never writes to a database this replica
        # did not start on.
        with store.engine.connect() as busy:
            busy.exec_driver_sql("SELECT 1")
            with pytest.raises(StoreError, match="deleted or replaced"):
                store.heartbeat(lease)
        assert path.read_bytes() == b""  # nothing written to the other file

        path.unlink()
        os.rename(aside, path)  # the replica's own file is back
        assert won(store.acquire(request("t", int(time.time() * 1000)))) is None  # held
        assert store.heartbeat(lease)
    finally:
        store.dispose()


def test_every_statement_is_refused_once_the_file_is_deleted(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    store = LeaseStore.from_url(f"sqlite:///{path}")
    try:
        store.create_tables()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink()
        with pytest.raises(DatabaseFileChanged):
            store.acquire(request("t", 1000))
        with store.engine.connect() as busy:  # the pooled connection is busy: a new one
            busy.exec_driver_sql("SELECT 1")
            with pytest.raises(StoreError, match="deleted or replaced"):
                store.leases()
    finally:
        store.dispose()
