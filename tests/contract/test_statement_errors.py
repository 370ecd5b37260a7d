"""A database that answers with an error is not a database that is down (docs/design.md §5.19).

Real faults on every backend: a column of the runs table renamed under a
running replica (the database answers every acquisition with "no such
column"), and a TCP proxy taken down (PostgreSQL, MariaDB: no answer at all).
Only the second is an outage: "database unavailable", DatabaseUnavailable,
``database_down_for`` in health(). The first is one ERROR that names the
statement and the tasks, and health() says the database refuses statements.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from cronlease import DatabaseUnavailable, RunContext, Scheduler
from cronlease._lease.database import normalize_url
from tests.conftest import url_for
from tests.support.procs import wait_for
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.slow  # real ticks around each fault

UNAVAILABLE = "database unavailable"
REFUSED = "the database answered"


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "cronlease" and record.levelno == level
    ]


def rename_error_column(url: str, old: str, new: str) -> None:
    engine = create_engine(normalize_url(url), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE cronlease_runs RENAME COLUMN {old} TO {new}"))
    finally:
        engine.dispose()


@pytest.fixture
def renamed_column(db_url: str) -> Iterator[list[str]]:
    """Rename cronlease_runs.error while the test wants it; put it back in any case."""
    state: list[str] = []
    yield state
    if state:
        rename_error_column(db_url, "error_renamed", "error")


def test_an_answered_error_is_not_an_outage(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture, renamed_column: list[str]
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(db_url, history_retention=None)
    slots: list[int] = []
    outages: list[DatabaseUnavailable] = []
    scheduler.listen(outages.append, DatabaseUnavailable)

    @scheduler.task(every="1s", name=task_name)
    def record(ctx: RunContext) -> None:
        slots.append(ctx.slot)

    with scheduler:
        wait_for(lambda: slots, 20, "a first run")
        rename_error_column(db_url, "error", "error_renamed")
        renamed_column.append("renamed")
        errors_before = scheduler.stats["lease_errors"]
        wait_for(lambda: scheduler.stats["lease_errors"] >= errors_before + 3, 20, "refusals")
        health = scheduler.health(database_threshold=0)
        rename_error_column(db_url, "error_renamed", "error")
        renamed_column.clear()
        runs = len(slots)
        wait_for(lambda: len(slots) >= runs + 2, 20, "runs once the column is back")
    assert not [m for m in messages(caplog, logging.WARNING) if UNAVAILABLE in m]
    assert outages == []
    refused = [m for m in messages(caplog, logging.ERROR) if REFUSED in m]
    assert len(refused) == 1, refused  # once, not once per tick
    assert task_name in refused[0] and "acquiring" in refused[0]
    assert health.database_down_for is None
    assert not health.ok
    assert any("refuses" in problem for problem in health.problems), health.problems
    assert not any("unreachable" in problem for problem in health.problems), health.problems


class Unreachable:
    """A database that does not answer until ``up()``: a SQLite file in a directory
    not made yet, a server behind a TCP proxy not listening yet."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.proxy: TcpProxy | None = None
        if backend == "sqlite":
            self.directory = tmp_path / "not-yet"
            self.url = f"sqlite:///{self.directory / 'cronlease.db'}"
            return
        real = make_url(url_for(backend, tmp_path))
        self.proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
        self.url = real.set(host="127.0.0.1", port=self.proxy.port).render_as_string(
            hide_password=False
        )

    def up(self) -> None:
        if self.proxy is None:
            self.directory.mkdir()
        else:
            self.proxy.up()

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.down()


def test_no_answer_is_an_outage(
    backend: str, tmp_path: Path, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    database = Unreachable(backend, tmp_path)
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(database.url, history_retention=None)
    slots: list[int] = []
    outages: list[DatabaseUnavailable] = []
    scheduler.listen(outages.append, DatabaseUnavailable)
    scheduler.add_task(lambda ctx: slots.append(ctx.slot), every="1s", name=task_name)
    try:
        with scheduler:
            wait_for(lambda: scheduler.stats["lease_errors"] >= 2, 30, "failed ticks")
            health = scheduler.health(database_threshold=0)
            database.up()
            wait_for(lambda: slots, 30, "runs once it answers")
    finally:
        database.close()
    assert len([m for m in messages(caplog, logging.WARNING) if UNAVAILABLE in m]) == 1
    assert len(outages) == 1
    assert not [m for m in messages(caplog, logging.ERROR) if REFUSED in m]
    assert health.database_down_for is not None
    assert any("unreachable" in problem for problem in health.problems), health.problems
