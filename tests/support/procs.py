"""Real OS processes for tests: the one way tests start a Python replica or worker process.

``Proc("-m", "tests.support.replica", url, task, env={...})`` runs
``python -m tests.support.replica URL TASK`` from the repository root, with
the repository on ``PYTHONPATH`` and the test's environment plus ``env``.
The scripts it starts live in ``tests/support/`` and talk over stdin/stdout
lines: :meth:`Proc.expect` waits for the next line (with a deadline),
:meth:`Proc.send` writes one, :meth:`Proc.stop` asks the script to stop (a
``stop`` line), :meth:`Proc.terminate` sends SIGTERM and :meth:`Proc.kill`
SIGKILL. Every stdout line read is kept in :attr:`Proc.output`; stderr goes to
a file, read with :meth:`Proc.stderr`. :func:`wait_for` polls any condition
with a deadline.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class Proc:
    """A child process whose stdout lines are read by a thread, so reads can time out."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
    ) -> None:
        """``prefix``: a command that execs Python (``ip netns exec NAME``)."""
        self.stderr_file = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives with the process)
        self.popen = subprocess.Popen(
            [*prefix, sys.executable, *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []  # every stdout line expect() has read, in order
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, prefix: str, timeout: float = 30.0) -> str:
        """The next stdout line, which must start with ``prefix`` (``""``: any line).

        Fails if no line comes within ``timeout`` seconds or the process exits first.
        """
        try:
            line = self._lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise AssertionError(
                f"no {prefix!r} line within {timeout} s; stderr:\n{self.stderr()}"
            ) from None
        if line is None:
            raise AssertionError(f"expected {prefix!r}, but it exited; stderr:\n{self.stderr()}")
        self.output.append(line)
        if not line.startswith(prefix):
            raise AssertionError(f"expected {prefix!r}, got {line!r}; stderr:\n{self.stderr()}")
        return line

    def drain(self) -> list[str]:
        """Every stdout line so far, without waiting (for tests watching several processes)."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return self.output
            if line is None:
                self._lines.put(None)  # keep the end for expect()
                return self.output
            self.output.append(line)

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def stderr(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read()

    def stop(self, timeout: float = 30.0) -> int:
        """Send ``stop`` (the support scripts' last command), wait; SIGKILL if it hangs.

        The exit status (negative: the signal that ended it).
        """
        if self.popen.poll() is None:
            try:
                self.send("stop")
                return self.popen.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        return self.popen.wait()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 5.0,
    message: str | Callable[[], str] = "",
    *,
    interval: float = 0.05,
) -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Fails the test after ``timeout`` seconds. This is the only way tests wait:
    a sleep that guesses how long something takes is either slow or flaky. A
    callable ``message`` is called at the timeout: a message that shows state
    (what was seen, the logs) shows it then, not as it was when the wait began.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout} s waiting for {said or predicate}")
        time.sleep(interval)
