"""PostgreSQL: a late finish racing a takeover does not deadlock (lease row locked first)."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import create_engine, text, update

from cronlease import LeaseStore
from cronlease._lease.database import normalize_url
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.schema import leases
from tests.conftest import url_for
from tests.support.leases import won
from tests.support.procs import wait_for


def waiting_on_locks(engine_url: str) -> int:
    engine = create_engine(normalize_url(engine_url))
    with engine.connect() as conn:
        count = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database() "
                # this run's sessions only: the URL names them (tests/support/databases.py)
                "AND application_name = current_setting('application_name')"
            )
        ).scalar_one()
    engine.dispose()
    return int(count)


def test_late_finish_racing_a_takeover(tmp_path: Path, task_name: str) -> None:
    url = url_for("postgresql", tmp_path)
    old, new = LeaseStore.from_url(url), LeaseStore.from_url(url)
    old.create_tables()
    first = won(
        old.acquire(AcquireRequest(name=task_name, slot=1000, ttl=60, holder="old", tolerance=1))
    )
    assert first is not None
    with old.engine.begin() as conn:  # the old holder stopped renewing: its lease expired
        conn.execute(update(leases).where(leases.c.name == task_name).values(expires_at=0.0))

    blocker = create_engine(normalize_url(url)).connect()
    blocker.begin()
    blocker.execute(
        text("SELECT 1 FROM cronlease_leases WHERE name = :n FOR UPDATE"), {"n": task_name}
    )
    errors: list[BaseException] = []
    results: dict[str, object] = {}

    def run(label: str, action: object) -> None:
        try:
            results[label] = action()  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    baseline = waiting_on_locks(url)
    takeover = threading.Thread(
        target=run,
        args=(
            "takeover",
            lambda: won(
                new.acquire(
                    AcquireRequest(name=task_name, slot=2000, ttl=60, holder="new", tolerance=1)
                )
            ),
        ),
    )
    takeover.start()
    wait_for(lambda: waiting_on_locks(url) >= baseline + 1, 10, "the takeover to wait")
    late = threading.Thread(target=run, args=("finish", lambda: old.finish(first, "succeeded")))
    late.start()
    wait_for(lambda: waiting_on_locks(url) >= baseline + 2, 10, "the late finish to wait")
    blocker.rollback()
    blocker.close()
    takeover.join(30)
    late.join(30)
    assert not errors, errors
    lease = results["takeover"]
    assert isinstance(lease, Lease) and lease.fence == 2
    runs = {run.slot: run.outcome for run in new.history(task_name)}
    assert runs == {1000: "lost", 2000: "running"}
    old.dispose()
    new.dispose()
