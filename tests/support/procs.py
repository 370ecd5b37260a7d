"""Real OS processes for tests: the one way tests start a Python replica or worker process.

``Proc("-m", "tests.support.replica", url, task, env={...})`` runs
``python -m tests.support.replica URL TASK`` from the repository root, with
the repository on ``PYTHONPATH`` and the test's environment plus ``env``.
The scripts it starts live in ``tests/support/`` and talk over stdin/stdout
lines: :meth:`Proc.expect` waits for the next line (with a deadline),
:meth:`Proc.send` writes one, :meth:`Proc.stop` asks the script to stop (a
``stop`` line), :meth:`Proc.terminate` sends SIGTERM (:func:`terminate_all`:
to several at once) and :meth:`Proc.kill` SIGKILL. Every stdout line read is
kept in :attr:`Proc.output`; stderr goes to a file, read with
:meth:`Proc.stderr`. :func:`wait_for` polls any condition with a deadline.

A ``-m`` module whose start no environment variable or prefix changes is forked
from this test worker's fork server (``tests/support/zygote.py``: the same
process, less the interpreter start and imports); ``CRONLEASE_TEST_EXEC=1``
starts every process with ``subprocess`` instead.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class Proc:
    """A child process whose stdout lines are read by a thread, so reads can time out."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
        cwd: Path = ROOT,
        inherit_env: bool = True,
    ) -> None:
        """``prefix``: a command that execs Python (``ip netns exec NAME``). ``cwd``: its
        working directory. ``inherit_env=False``: ``env`` (and ``PYTHONPATH``) is its whole
        environment, not additions to the test's."""
        # the child's stderr is this same open file, one file offset shared by both:
        # the child appends, and stderr() reads without moving the offset (pread)
        self.stderr_file = tempfile.TemporaryFile(mode="a+")  # noqa: SIM115 (lives with the process)
        base = os.environ if inherit_env else {}
        full_env = {**base, "PYTHONPATH": str(ROOT), **(env or {})}
        forked = None
        if not prefix and forkable(args, full_env):
            forked = _zygote_start(args, full_env, self.stderr_file, cwd)
        self.popen: subprocess.Popen[str] | Forked = forked or subprocess.Popen(
            [*prefix, sys.executable, *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            text=True,
            env=full_env,
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
        return self.read_to_end(timeout=0.0)

    def read_to_end(self, timeout: float = 5.0) -> list[str]:
        """Every stdout line, once the child's stdout is closed (it ended) or ``timeout``
        seconds have passed (a process it left running may hold its stdout open)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
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
        """Everything the child wrote to stderr so far. Read with ``pread``: the child
        shares the file's offset, so a seek here made its next lines overwrite earlier ones."""
        fd, chunks, offset = self.stderr_file.fileno(), [], 0
        while chunk := os.pread(fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks).decode("utf-8", "surrogateescape")

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


#: variables a fresh interpreter reads at its start (or the dynamic loader does):
#: a child forked from an interpreter already started would not honour them
_STARTUP = ("LD_", "PYTHON", "FAKETIME", "DONT_FAKE", "MALLOC", "LANG", "LC_")
#: the environment the fork server starts with, whenever it starts (a test may have
#: changed os.environ by then): children whose start-up variables differ are exec'd
_SERVER_ENV = dict(os.environ)


def forkable(args: tuple[str, ...], env: dict[str, str]) -> bool:
    """Whether ``python ARGS`` with ``env`` can come from the fork server."""
    if os.environ.get("CRONLEASE_TEST_EXEC") or len(args) < 2 or args[0] != "-m":
        return False
    differs = {k for k in env.keys() ^ _SERVER_ENV.keys()} | {
        k for k in env.keys() & _SERVER_ENV.keys() if env[k] != _SERVER_ENV[k]
    }
    return not any(k.startswith(_STARTUP) and k != "PYTHONPATH" for k in differs)


class Forked:
    """The part of :class:`subprocess.Popen` tests use, for a child of the fork server."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, stdin: int, stdout: int):
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn
        self.stdin = open(stdin, "w", encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
        self.stdout = open(stdout, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                packet = self._conn.recv(64)
            except (BlockingIOError, TimeoutError):
                return None
            # an empty packet: the server died; its child may live on, unwaitable
            self.returncode = int(packet.split()[1]) if packet else -signal.SIGKILL
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # as Popen: never a pid that may have been reused
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    """This test worker's fork server, started at its first use."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="cronlease-zygote-")
        self.path = os.path.join(self.dir.name, "socket")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.support.zygote", self.path],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**_SERVER_ENV, "PYTHONPATH": str(ROOT)},
        )
        assert self.popen.stdout is not None
        if self.popen.stdout.readline() != b"ready\n":
            raise RuntimeError("the fork server did not start")
        atexit.register(self.close)

    def close(self) -> None:
        if self.popen.poll() is None:
            assert self.popen.stdin is not None
            self.popen.stdin.close()  # its end: it exits at EOF
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.dir.cleanup()

    def start(self, args: tuple[str, ...], env: dict[str, str], stderr: int, cwd: Path) -> Forked:
        child_in, our_in = os.pipe()
        our_out, child_out = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = {"module": args[1], "args": list(args[2:]), "cwd": str(cwd), "env": env}
            socket.send_fds(conn, [json.dumps(request).encode()], [child_in, child_out, stderr])
            conn.settimeout(30)
            answer = conn.recv(64)
        except BaseException:
            conn.close()
            os.close(our_in)
            os.close(our_out)
            raise
        finally:  # the child has its own copies now, or never will
            os.close(child_in)
            os.close(child_out)
        if not answer.startswith(b"pid "):
            conn.close()
            os.close(our_in)
            os.close(our_out)
            raise RuntimeError(f"the fork server answered {answer!r}")
        return Forked([sys.executable, *args], conn, int(answer.split()[1]), our_in, our_out)


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _zygote_start(
    args: tuple[str, ...], env: dict[str, str], stderr_file: object, cwd: Path
) -> Forked:
    global _zygote
    with _zygote_lock:
        if _zygote is None or _zygote.popen.poll() is not None:
            _zygote = _Zygote()
        zygote = _zygote
    return zygote.start(args, env, stderr_file.fileno(), cwd)  # type: ignore[attr-defined]


def terminate_all(procs: Iterable[Proc], timeout: float = 30.0) -> list[int]:
    """SIGTERM to every process at once, then each one's exit status (as
    :meth:`Proc.terminate`, but their shutdowns overlap instead of adding up). One
    signal each: a second one tells a cronlease replica to stop waiting."""
    procs = list(procs)
    for proc in procs:
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    return [proc.popen.wait(timeout=max(0.0, deadline - time.monotonic())) for proc in procs]


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
