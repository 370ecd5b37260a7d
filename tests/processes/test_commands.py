"""Command tasks in process: environment, output, exit status, timeouts, process groups."""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cronlease import Scheduler, _shell_task
from cronlease._shell_task import (
    STDERR_TAIL_LINES,
    CommandTask,
    terminate_running,
)
from cronlease._task import Liveness, RunContext
from cronlease.errors import CommandError, TaskTimeout
from tests.support.procs import process_gone, wait_for

SCHEDULED_FOR = datetime(2024, 5, 1, 3, 0, tzinfo=timezone.utc)


def context(ttl: float = 60.0, *, manual: bool = False) -> RunContext:
    return RunContext(
        name="job",
        slot=int(SCHEDULED_FOR.timestamp() * 1000),
        fence=7,
        scheduled_for=SCHEDULED_FOR,
        manual=manual,
        liveness=Liveness(ttl, time.monotonic()),
    )


def test_environment_has_the_run_and_the_configured_variables(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    task = CommandTask(
        "job",
        ["sh", "-c", f"env > {out}"],
        env={"GREETING": "hi there"},
        cwd=str(tmp_path),
    )
    task(context(manual=True))
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert env["CRONLEASE_TASK"] == "job"
    assert env["CRONLEASE_SLOT"] == str(int(SCHEDULED_FOR.timestamp() * 1000))
    assert env["CRONLEASE_FENCE"] == "7"
    assert env["CRONLEASE_SCHEDULED_FOR"] == "2024-05-01T03:00:00.000Z"
    assert env["CRONLEASE_MANUAL"] == "1"
    assert env["GREETING"] == "hi there"
    assert env["PATH"] == os.environ["PATH"]


def test_no_shell_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cronlease.task")
    CommandTask("plain", "echo $HOME 'two words'")(context())
    CommandTask("shell", "echo $((1 + 2))", shell=True)(context())
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("cronlease.task.plain", "$HOME two words") in lines
    assert ("cronlease.task.shell", "3") in lines


def test_output_is_logged_line_by_line_while_it_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease.task")
    release = tmp_path / "release"
    script = (
        f"echo first; echo oops >&2; while [ ! -e {release} ]; do sleep 0.02; done; printf last"
    )
    task = CommandTask("stream", ["sh", "-c", script])
    thread = threading.Thread(target=task, args=(context(),))
    thread.start()
    try:
        # The first lines are in the log while the command still runs.
        wait_for(lambda: {"first", "oops"} <= {r.getMessage() for r in caplog.records}, 10)
        assert thread.is_alive()
    finally:
        release.touch()
        thread.join(10)
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels == {"first": logging.INFO, "oops": logging.WARNING, "last": logging.INFO}


def test_output_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cronlease.task")
    # 40 KB without a newline on stdout, 5000 lines on stderr, then failure
    script = (
        "python3 -c \"import sys; sys.stdout.write('x' * 40000); "
        "[print('err line', i, file=sys.stderr) for i in range(5000)]\"; exit 4"
    )
    with pytest.raises(CommandError) as caught:
        CommandTask("big", script, shell=True)(context())
    chunks = [r.getMessage() for r in caplog.records if r.getMessage().startswith("x")]
    assert "".join(chunks) == "x" * 40000
    assert max(len(chunk) for chunk in chunks) <= 16 * 1024
    message = str(caught.value)
    assert "exited with status 4" in message
    assert message.endswith("err line 4999")
    assert "err line 4999" in message and f"err line {4999 - STDERR_TAIL_LINES}" not in message
    assert len(message) < 10_000


def test_nonzero_exit_carries_status_duration_and_stderr_tail() -> None:
    with pytest.raises(CommandError) as caught:
        CommandTask("fails", ["sh", "-c", "echo about to fail >&2; exit 3"])(context())
    message = str(caught.value)
    assert "exited with status 3 after" in message
    assert message.endswith("about to fail")


def test_killed_by_a_signal_is_a_failure() -> None:
    with pytest.raises(CommandError, match="was killed by SIGKILL"):
        CommandTask("dies", ["sh", "-c", "kill -KILL $$"])(context())


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "'no-such-program-cronlease' not found"),
        ("not-executable", "is not executable"),
        ("bad-cwd", "working directory"),
    ],
)
def test_a_command_that_cannot_start_fails_clearly(
    tmp_path: Path, case: str, expected: str
) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    if case == "missing":
        task = CommandTask("x", ["no-such-program-cronlease"])
    elif case == "not-executable":
        task = CommandTask("x", [str(script)])
    else:
        task = CommandTask("x", ["true"], cwd=str(tmp_path / "gone"))
    with pytest.raises(CommandError, match=expected):
        task(context())


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = CommandTask(
        "slow",
        ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"],
        timeout=0.5,
        kill_grace=5.0,
    )
    started = time.monotonic()
    with pytest.raises(TaskTimeout, match=r"timeout of 0\.5 s"):
        task(context())
    assert time.monotonic() - started < 4.0  # TERM was enough: no wait for the KILL grace
    grandchild = int(pidfile.read_text())
    wait_for(lambda: process_gone(grandchild), 5)


def test_timeout_escalates_to_sigkill_for_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = CommandTask(
        "stubborn",
        ["sh", "-c", f"trap '' TERM; sleep 60 & echo $! > {pidfile}; wait; wait"],
        timeout=0.3,
        kill_grace=0.5,
    )
    started = time.monotonic()
    with pytest.raises(TaskTimeout):
        task(context())
    assert time.monotonic() - started >= 0.8
    grandchild = int(pidfile.read_text())
    wait_for(lambda: process_gone(grandchild), 5)


def test_a_lost_lease_terminates_the_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = CommandTask("lost", ["sh", "-c", f"echo $$ > {pidfile}; sleep 60"], kill_grace=1.0)
    with pytest.raises(CommandError, match="lost its lease"):
        task(context(ttl=0.3))
    wait_for(lambda: process_gone(int(pidfile.read_text())), 5)


def test_terminate_running_stops_commands_in_progress(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = CommandTask("long", ["sh", "-c", f"echo $$ > {pidfile}; sleep 60"], kill_grace=1.0)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            task(context())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 10)
    # the command may write its pid before its supervisor is registered
    wait_for(lambda: len(_shell_task._running) == 1, 10)
    assert terminate_running("test says stop") == 1
    thread.join(10)
    assert not thread.is_alive()
    assert len(errors) == 1 and "test says stop" in str(errors[0])
    assert terminate_running() == 0


def test_a_command_task_through_the_scheduler_records_its_outcome(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'db.sqlite'}")
    scheduler.add_task(
        CommandTask("fails", ["sh", "-c", "echo disk full >&2; exit 5"]), every="1h", name="fails"
    )
    scheduler.add_task(CommandTask("slow", ["sleep", "30"], timeout=0.3), every="1h", name="slow")
    try:
        assert scheduler.run_now("fails") == "failed"
        assert scheduler.run_now("slow") == "timed_out"
        (failed,) = scheduler.store.history("fails")
        (timed_out,) = scheduler.store.history("slow")
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
    assert failed.error is not None and "exited with status 5" in failed.error
    assert failed.error.endswith("disk full")
    assert timed_out.outcome == "timed_out"
    assert timed_out.error is not None and "timeout of 0.3 s" in timed_out.error
