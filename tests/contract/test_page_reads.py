"""The status page reads through a pool of its own, once per snapshot (docs/design.md §8).

Before issue 14 every request read through the scheduler's own pool — eight
statements a request (lease rows, the clock three times, recent runs, abandoned
counts, then health()'s lease rows and clock again) — so a page refreshed by a few
browsers took connections the acquirer and the finisher were waiting for.
Statements are counted at SQLAlchemy's cursor events of each engine.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from cronlease import Scheduler
from cronlease.web import StatusPage
from tests.conftest import url_for


def statements(engine: Engine) -> list[str]:
    """The statements sent on ``engine`` from now on (SQLite's BEGIN IMMEDIATE aside)."""
    seen: list[str] = []

    def sent(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if not statement.startswith("BEGIN"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", sent)
    return seen


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Scheduler:
    scheduler = Scheduler(db_url, pool_size=1, max_overflow=0, pool_timeout=1)
    scheduler.add_task(lambda: None, every="1m", name=task_name)
    assert scheduler.run_now(task_name) == "succeeded"
    return scheduler


def get(page: StatusPage) -> int:
    return page.respond("GET", "/status.json", "", "")[0]


def test_one_snapshot_serves_concurrent_requests_and_none_read_the_replicas_pool(
    scheduler: Scheduler,
) -> None:
    uncached = StatusPage(scheduler, cache=0)
    per_build = statements(uncached.reader.engine)
    assert get(uncached) == 200
    reads = len(per_build)
    # lease rows, the clock, the schedule rows (none here: no jobs read), recent runs,
    # abandoned counts
    assert reads == 5, per_build
    assert not uncached.reader.engine.pool._pre_ping  # no ping beside each: five round trips
    assert get(uncached) == 200
    assert len(per_build) == 2 * reads  # no cache: a build per request

    page = StatusPage(scheduler, cache=60)
    on_page = statements(page.reader.engine)
    on_replica = statements(scheduler.store.engine)
    codes: list[int] = []
    requests = [threading.Thread(target=lambda: codes.append(get(page))) for _ in range(8)]
    for thread in requests:
        thread.start()
    for thread in requests:
        thread.join(30)
    assert codes == [200] * 8
    assert len(on_page) == reads, "eight requests, one snapshot"
    assert on_replica == [], "the page read through the replica's own pool"


def test_the_page_answers_while_the_replicas_only_connection_is_taken(
    scheduler: Scheduler,
) -> None:
    page = StatusPage(scheduler, cache=0)
    busy = scheduler.store.engine.raw_connection()  # the acquirer's one connection, say
    try:
        status, _headers, body = page.respond("GET", "/status.json", "", "")
        assert status == 200, body
    finally:
        busy.close()


def test_a_snapshot_older_than_the_cache_is_read_again(tmp_path: Path, task_name: str) -> None:
    scheduler = Scheduler(url_for("sqlite", tmp_path))
    scheduler.add_task(lambda: None, every="1m", name=task_name)
    page = StatusPage(scheduler, cache=60)
    first = page.collect()
    assert scheduler.run_now(task_name) == "succeeded"
    assert page.collect() is first  # younger than the cache: the run is not seen yet
    page.cache = 0.0  # as if 60 s had passed
    fresh = page.collect()
    [task] = [t for t in fresh["tasks"] if t["name"] == task_name]
    assert task["runs"], "the snapshot read again shows the run"
