"""Declaring many tasks costs time linear in their number (issue 11, item 13).

Loading a 10,000-task ``cronlease.toml`` took 50 s: every task's line was
found by a scan of the whole file. Linearity is proven by counting, not
timing: the function calls (Python and C) that loading makes are counted
for N and 2N tasks, and must not much more than double (a scan per task
quadruples them). Speed figures are in ``benchmarks/config_scale.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import cronlease
from cronlease import Scheduler
from cronlease._run.timer.fire import Firing
from cronlease._task import Task
from cronlease._timing.schedule import Schedule
from cronlease.config import load_config

PACKAGE = str(Path(cronlease.__file__).parent)


def write_config(path: Path, tasks: int, *, distinct_schedules: bool = False) -> Path:
    with path.open("w", encoding="utf-8") as out:
        out.write('database = "sqlite:///unused.db"\n')
        for i in range(tasks):
            every = f"{3600 + i}s" if distinct_schedules else "1h"
            out.write(f'\n[tasks.task-{i}]\ncommand = "true"\nevery = "{every}"\n')
    return path


def calls_to_load(path: Path) -> int:
    """Calls made by cronlease's own code while loading ``path`` (the TOML parser's own
    work, linear and a hundred times larger, would hide a quadratic term)."""
    count = 0

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(PACKAGE):
            count += 1

    sys.setprofile(profile)
    try:
        config = load_config(path, import_calls=True)
    finally:
        sys.setprofile(None)
    assert len(config.tasks) > 0
    return count


@pytest.mark.parametrize("distinct_schedules", [False, True], ids=["one-schedule", "distinct"])
def test_loading_a_config_makes_calls_linear_in_its_tasks(
    tmp_path: Path, distinct_schedules: bool
) -> None:
    small = write_config(tmp_path / "small.toml", 400, distinct_schedules=distinct_schedules)
    large = write_config(tmp_path / "large.toml", 800, distinct_schedules=distinct_schedules)
    calls_to_load(small)  # imports and caches warmed once, outside the count
    ratio = calls_to_load(large) / calls_to_load(small)
    # linear: 2 (plus a little); one scan of the file per task: close to 4
    assert ratio < 2.5, f"twice the tasks made {ratio:.2f} times the calls"


def test_a_scheduler_takes_many_tasks_of_one_schedule_in_linear_time(tmp_path: Path) -> None:
    """Tasks of one schedule share one job; its member tuple was copied per task added.

    200,000 additions took about 80 s that way (quadratic), 0.2 s now: a
    deadline of 30 s cannot be missed by the linear code, and is by far by the
    quadratic one.
    """
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'leases.db'}")
    task = Task(name="t", schedule=Schedule.every(60), func=lambda: None)
    firing = Firing(scheduler.runner)
    additions = 200_000
    deadline = time.monotonic() + 30.0
    for added in range(additions):
        if added % 5_000 == 0 and time.monotonic() > deadline:
            pytest.fail(f"only {added} of {additions} tasks added in 30 s")
        firing.add(task)
    scheduler.store.dispose()


@pytest.mark.slow
def test_check_of_ten_thousand_tasks_finishes(tmp_path: Path) -> None:
    """The issue's shape, end to end through the command: 50 s before, ~2 s now."""
    import subprocess

    config = write_config(tmp_path / "cronlease.toml", 10_000)
    done = subprocess.run(
        [sys.executable, "-m", "cronlease", "check", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "OK, 10000 task(s)" in done.stdout
