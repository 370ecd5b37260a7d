"""A command failing every run: recorded as its exit status and stderr tail (no cronlease
traceback), and ``cronlease status --check`` (a real process) exits 1 naming it.
Overlap skips: one INFO line per streak, on a real scheduler."""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path

import pytest

from cronlease import Scheduler
from cronlease._events import TickSkipped
from cronlease._status import summarize_error
from cronlease.config import load_config
from tests.conftest import url_for
from tests.processes.test_cli import cli, write_config
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow

FAILING = "sh -c 'echo oops >&2; exit 3'"


def test_a_command_failing_every_run_is_its_exit_status_and_fails_the_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    url = url_for("sqlite", tmp_path)
    path = write_config(
        tmp_path,
        url,
        f"""
        [tasks.cmd]
        command = "{FAILING}"
        every = "1s"

        [tasks.patient]
        command = "{FAILING}"
        every = "1s"
        alert_after = 100
        """,
    )
    scheduler = Scheduler(url)
    for spec in load_config(path).tasks.values():
        spec.add_to(scheduler)
    with scheduler:
        wait_for(lambda: len(scheduler.store.history("cmd", 5)) >= 2, 20, "two runs of cmd")
    runs = scheduler.store.history("cmd", 5)
    assert {run.outcome for run in runs} == {"failed"}
    error = runs[0].error or ""
    assert error.startswith(f"command {FAILING!r} exited with status 3 after "), error
    assert error.endswith("last lines of stderr:\noops"), error
    assert "Traceback" not in error
    assert "exited with status 3" in summarize_error(error)
    failures = [r for r in caplog.records if r.name == "cronlease" and r.levelno >= logging.ERROR]
    assert failures and all(r.exc_info is None for r in failures)  # no traceback logged
    assert "exited with status 3" in failures[0].getMessage()

    result = cli("status", "--check", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    failing = [line for line in result.stderr.splitlines() if "is failing" in line]
    assert len(failing) == 1, result.stderr  # "patient" has not failed 100 times yet
    assert re.search(
        r"cmd is failing \(\d+ runs? in a row, last: command .* exited with status 3", failing[0]
    )
    status = json.loads(cli("status", "--json", cwd=tmp_path).stdout)
    assert status["failing"] == ["cmd"]
    (cmd,) = [task for task in status["tasks"] if task["name"] == "cmd"]
    assert cmd["shown_state"] == "failing" and cmd["consecutive_failures"] >= 2


def test_overlap_skips_are_one_info_line_per_streak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, task_name: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="cronlease")
    scheduler = Scheduler(url_for("sqlite", tmp_path))
    release = threading.Event()
    skipped: list[TickSkipped] = []
    scheduler.listen(skipped.append, TickSkipped)
    runs: list[int] = []

    def long_run() -> None:
        runs.append(1)
        if len(runs) == 1:
            release.wait(30)  # the first run outlasts two ticks

    scheduler.add_task(long_run, every="1s", name=task_name)
    with scheduler:
        wait_for(lambda: len([s for s in skipped if s.reason == "overlap"]) >= 2, 20, "2 skips")
        release.set()
        wait_for(lambda: len(runs) >= 2, 20, "the run after the streak")
    overlaps = [s for s in skipped if s.reason == "overlap"]
    lines = [r for r in caplog.records if "still running" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (
            logging.INFO,
            f"{task_name}: skipped {len(overlaps)} of the last {len(overlaps) + 1} ticks: "
            "still running",
        )
    ]
    assert scheduler.skipped_ticks[task_name] == {"overlap": len(overlaps)}
