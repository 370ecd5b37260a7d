"""A database that is down skips ticks with one warning; the replica survives and resumes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from cronlease import RunContext, Scheduler
from tests.conftest import url_for
from tests.support.procs import wait_for
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.slow  # each waits for real ticks around an outage


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "cronlease" and record.levelno >= logging.WARNING
    ]


def test_postgres_outage_skips_ticks_once_and_recovers(
    tmp_path: Path, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    real = make_url(url_for("postgresql", tmp_path))
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    caplog.set_level(logging.INFO, logger="cronlease")
    slots: list[int] = []
    scheduler = Scheduler(url)

    @scheduler.task(every="1s", name=task_name)
    def record(ctx: RunContext) -> None:
        slots.append(ctx.slot)

    # The database is unreachable when the host application starts the scheduler.
    scheduler.start()
    try:
        wait_for(lambda: scheduler.stats["lease_errors"] >= 3, 15, "three failed ticks")
        assert slots == []
        warnings = outage_warnings(caplog)
        assert len(warnings) == 1, warnings
        assert "database unavailable" in warnings[0]

        proxy.up()
        wait_for(lambda: len(slots) >= 2, 15, "runs after the database came back")
        assert any("available again" in w for w in outage_warnings(caplog))

        # Cut every connection, as a server restart would, while ticks keep coming.
        errors_before = scheduler.stats["lease_errors"]
        proxy.down()
        wait_for(
            lambda: scheduler.stats["lease_errors"] >= errors_before + 2, 15, "two more failures"
        )
        runs_during_outage = len(slots)
        proxy.up()
        wait_for(lambda: len(slots) >= runs_during_outage + 2, 15, "runs after the second outage")
    finally:
        scheduler.shutdown()
        proxy.down()
    assert scheduler.running is False
    unavailable = [w for w in outage_warnings(caplog) if "database unavailable" in w]
    assert len(unavailable) == 2, unavailable  # one per outage, not one per tick
    assert len(slots) == len(set(slots))


def test_sqlite_file_unreachable_then_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "not-yet"
    caplog.set_level(logging.INFO, logger="cronlease")
    slots: list[int] = []
    scheduler = Scheduler(f"sqlite:///{directory / 'cronlease.db'}")
    scheduler.add_task(lambda ctx: slots.append(ctx.slot), every="1s", name="tick")
    scheduler.start()
    try:
        wait_for(lambda: scheduler.stats["lease_errors"] >= 2, 15, "two failed ticks")
        assert len(outage_warnings(caplog)) == 1
        directory.mkdir()
        wait_for(lambda: len(slots) >= 2, 15, "runs once the file can be opened")
    finally:
        scheduler.shutdown()


def test_task_exception_is_recorded_and_scheduler_goes_on(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    scheduler = Scheduler(db_url)

    @scheduler.task(every="1s", name=task_name)
    def flaky(ctx: RunContext) -> None:
        calls.append(ctx.slot)
        if len(calls) == 1:
            raise RuntimeError("boom <b>")

    with scheduler:
        wait_for(lambda: len(calls) >= 3, 20, "three runs")
    history = scheduler.store.history(task_name, limit=10)
    by_slot = {run.slot: run for run in history}
    failed = by_slot[calls[0]]
    assert failed.outcome == "failed"
    assert failed.error is not None and "RuntimeError: boom <b>" in failed.error
    assert all(by_slot[slot].outcome == "succeeded" for slot in calls[1:] if slot in by_slot)
    assert any(record.exc_info for record in caplog.records if record.name == "cronlease")
