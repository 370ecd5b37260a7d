"""The member row carries a replica's roles; a members table of the version before roles
(issue 14) gets the column in place, and its old replicas' writes still work (issue 16)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, inspect, text
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.membership import MemberBeat
from cronlease._lease.schema import members
from cronlease._lease.store import LeaseStore
from tests.conftest import url_for
from tests.support.old_schema import own_database


@pytest.fixture
def old_url(backend: str, tmp_path: Path) -> Iterator[str]:
    url_for(backend, tmp_path)  # skips when the backend is unreachable
    with own_database(backend, str(tmp_path / "old.db")) as url:
        yield url


def test_an_old_members_table_gets_roles_and_old_replicas_still_renew(old_url: str) -> None:
    engine = create_engine(normalize_url(old_url), poolclass=NullPool)
    old = MetaData()
    table = members.to_metadata(old)
    table._columns.remove(table.c.roles)  # the table as issue 14 made it
    old.create_all(engine)
    try:
        store = LeaseStore.from_url(old_url)
        try:
            store.create_tables()
            store.create_tables()  # again: nothing left to do
            assert "roles" in {c["name"] for c in inspect(engine).get_columns(members.name)}
            with engine.begin() as conn:  # an old replica's insert names no roles
                conn.execute(
                    text(
                        f"INSERT INTO {members.name} (holder, namespace, task_set, started_at,"
                        " renewed_at, expires_at) VALUES ('old:1', '', 'd1', 0, 0, 1e12)"
                    )
                )
            seen = store.fleet.renew([MemberBeat("new:1", "d1", 30.0, roles="ops,reports")])
            by_holder = {m.holder: m.roles for m in seen.members}
            assert by_holder == {"old:1": frozenset(), "new:1": frozenset({"ops", "reports"})}
            again = store.fleet.renew([MemberBeat("new:1", "d1", 30.0)])  # roles dropped
            assert {m.holder: m.roles for m in again.members}["new:1"] == frozenset()
        finally:
            store.dispose()
    finally:
        engine.dispose()
