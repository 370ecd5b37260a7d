"""The test processes from the fork server behave as processes started with ``subprocess``.

``Proc`` forks a ``-m`` module from a server that has imported cronlease once
(tests/support/zygote.py). Every process test relies on what these check, in
both modes: the child's own pid (signals reach it), its environment and time
zone, argv and working directory, stdin/stdout/stderr, the exit status of a
``sys.exit``, of a signal, and of a hang cut by a timeout, and an exit that
joins non-daemon threads and runs ``atexit`` as an interpreter does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.support import procs
from tests.support.procs import ROOT, Proc

pytestmark = pytest.mark.slow


@pytest.fixture(params=["forked", "exec"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "exec":
        monkeypatch.setenv("CRONLEASE_TEST_EXEC", "1")
    else:
        monkeypatch.delenv("CRONLEASE_TEST_EXEC", raising=False)
    return str(request.param)


def start(*args: str, env: dict[str, str] | None = None) -> Proc:
    return Proc("-m", "tests.support.probe_child", *args, env=env)


def test_a_child_is_its_own_process_with_its_env_zone_argv_and_streams(mode: str) -> None:
    proc = start("a b", "ü", env={"PROBE": "value", "TZ": "Asia/Kolkata"})
    try:
        assert isinstance(proc.popen, procs.Forked) == (mode == "forked")
        assert proc.expect("pid ") == f"pid {proc.popen.pid}"
        assert proc.expect("env ") == "env value"
        assert proc.expect("offset ") == f"offset {5 * 3600 + 30 * 60}"
        assert json.loads(proc.expect("argv ")[5:]) == ["a b", "ü"]
        assert proc.expect("cwd ") == f"cwd {ROOT}"
        proc.send("echo héllo")
        assert proc.expect("echo ") == "echo héllo"
        proc.send("err to stderr")
        procs.wait_for(lambda: "to stderr" in proc.stderr(), 10, "the stderr line")
        proc.send("exit 3")
        assert proc.popen.wait(timeout=10) == 3
        assert [proc.expect(""), proc.expect("")] == ["thread", "atexit"]
    finally:
        proc.kill()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_ends_a_child_and_its_status_says_which(mode: str, signum: int) -> None:
    proc = start()
    try:
        for prefix in ("pid ", "env ", "offset ", "argv ", "cwd "):
            proc.expect(prefix)
        proc.send("hang")
        proc.expect("hanging")
        assert proc.popen.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=0.2)
        proc.popen.send_signal(signum)
        assert proc.popen.wait(timeout=10) == -signum
        proc.popen.send_signal(signal.SIGKILL)  # after its end: refused quietly, as Popen does
    finally:
        proc.kill()


def test_what_a_fresh_interpreter_reads_at_its_start_is_not_forked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRONLEASE_TEST_EXEC", raising=False)
    assert procs.forkable(("-m", "x"), dict(os.environ))
    for name in ("LD_PRELOAD", "FAKETIME", "PYTHONHASHSEED", "LC_ALL"):
        assert not procs.forkable(("-m", "x"), {name: "1"})
    assert not procs.forkable(("-c", "pass"), {})


def test_reading_stderr_while_the_child_writes_loses_no_line() -> None:
    """The child shares the stderr file's offset: reading it must not move that offset."""
    count = 20_000
    script = f"import sys\nfor i in range({count}):\n    sys.stderr.write(f'line {{i:06d}}\\n')\n"
    proc = procs.Proc("-c", script + "    sys.stderr.flush()\n")
    try:
        while proc.popen.poll() is None:
            proc.stderr()  # as wait_for(lambda: LINE in proc.stderr()) does
        assert proc.popen.wait(timeout=30) == 0
        assert proc.stderr().splitlines() == [f"line {i:06d}" for i in range(count)]
    finally:
        proc.kill()
