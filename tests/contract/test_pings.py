"""Healthchecks-style pings of real runs reach a local HTTP server: one sequence per attempt.

SQLite only: the pings follow the run's events, the same on every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronlease import Scheduler
from tests.conftest import url_for
from tests.support.capture_server import CaptureServer, capture_server


@pytest.fixture
def server() -> Iterator[CaptureServer]:
    with capture_server() as running:
        yield running


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return url_for("sqlite", tmp_path)


def broken() -> None:
    raise RuntimeError("disk full")


def ping_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "a ping to" in r.getMessage()]


def test_a_succeeding_and_a_failing_run_ping_start_then_success_or_fail(
    sqlite_url: str, task_name: str, server: CaptureServer, wait_for: Callable[..., object]
) -> None:
    scheduler = Scheduler(sqlite_url)
    ok = scheduler.add_task(lambda: None, every="1m", name=task_name, ping_url=f"{server.url}/ok")
    bad = scheduler.add_task(
        broken, every="1m", name=f"{task_name}-bad", ping_url=server.url + "/bad/"
    )
    quiet = scheduler.add_task(lambda: None, every="1m", name=f"{task_name}-quiet")
    now = datetime.now(timezone.utc)
    assert scheduler.runner.run_tick(ok, now) == "succeeded"
    assert scheduler.runner.run_tick(bad, now) == "failed"
    assert scheduler.runner.run_tick(quiet, now) == "succeeded"
    assert scheduler.run_now(task_name) == "succeeded"  # a manual run is an attempt too
    wait_for(lambda: len(server.seen()) >= 6, 10, "six pings")
    seen = server.seen()
    assert len(seen) == 6
    paths = [request.path.partition("?")[0] for request in seen]
    assert sorted(paths) == sorted(
        ["/ok/start", "/ok", "/ok/start", "/ok", "/bad/start", "/bad/fail"]
    )
    runs: dict[str, list[str]] = {}
    for request in seen:
        path, _, query = request.path.partition("?")
        runs.setdefault(query, []).append(path.rsplit("/", 1)[-1])
    # each attempt is one rid: its start, then its end
    assert sorted(runs.values()) == [["start", "fail"], ["start", "ok"], ["start", "ok"]]
    fail = next(request for request in seen if request.path.startswith("/bad/fail"))
    assert fail.method == "POST" and fail.body == b"failed: RuntimeError: disk full"
    assert [run.outcome for run in scheduler.store.history(bad.full_name, 5)] == ["failed"]


def test_a_failing_ping_server_is_logged_once_per_streak_and_never_fails_a_run(
    sqlite_url: str,
    task_name: str,
    server: CaptureServer,
    caplog: pytest.LogCaptureFixture,
    wait_for: Callable[..., object],
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(sqlite_url)
    task = scheduler.add_task(lambda: None, every="1m", name=task_name, ping_url=server.url)
    server.status = 500
    start = datetime.now(timezone.utc)
    for index in range(3):
        assert scheduler.runner.run_tick(task, start + timedelta(milliseconds=index)) == "succeeded"
    wait_for(lambda: len(server.seen()) == 6, 10, "six pings answered 500")
    wait_for(lambda: ping_lines(caplog), 10, "the ping warning")
    assert ping_lines(caplog) == [
        f"{task_name}: a ping to 127.0.0.1 failed: HTTP 500; the run is unaffected "
        "(ping; the next ones are counted until one is not)"
    ]
    server.status = 200
    assert scheduler.runner.run_tick(task, start + timedelta(milliseconds=5)) == "succeeded"
    wait_for(lambda: len(server.seen()) == 8, 10, "the pings answered again")
    wait_for(lambda: any("in a row failed to ping" in r.getMessage() for r in caplog.records), 10)
    assert [run.outcome for run in scheduler.store.history(task_name, 10)] == ["succeeded"] * 4


def test_a_hanging_ping_server_does_not_hold_the_run(
    sqlite_url: str,
    task_name: str,
    server: CaptureServer,
    caplog: pytest.LogCaptureFixture,
    wait_for: Callable[..., object],
) -> None:
    caplog.set_level(logging.WARNING, logger="cronlease")
    scheduler = Scheduler(sqlite_url)
    task = scheduler.add_task(lambda: None, every="1m", name=task_name, ping_url=server.url)
    server.released.clear()  # every request waits in the server until released
    assert scheduler.runner.run_tick(task, datetime.now(timezone.utc)) == "succeeded"
    # The run was recorded while its start ping still hangs: a ping sent on the run's
    # thread would have returned only at its timeout, and logged that it failed.
    assert [run.outcome for run in scheduler.store.history(task_name, 5)] == ["succeeded"]
    assert server.seen() == [] and ping_lines(caplog) == []
    server.released.set()
    wait_for(lambda: len(server.seen()) == 2, 10, "both pings, once the server answers")
    assert ping_lines(caplog) == []
