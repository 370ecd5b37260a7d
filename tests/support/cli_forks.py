"""Many ``cronlease`` commands, each a process of its own, for one interpreter start.

``python -m tests.support.cli_forks`` reads JSON lines ``{"argv": [...], "cwd":
DIR, "env": {...}}`` from stdin until EOF. It imports the CLI once, then for
each line forks a child that does what ``python -m cronlease ARGV`` run in
``cwd`` with exactly ``env`` does: its own working directory, environment,
``sys.path[0]``, local time zone (``TZ``), stdout and stderr (files) and exit
status (its stdin is ``/dev/null``, or the line's ``"stdin"``; a command still
running after 60 s gets SIGALRM). It prints one JSON line ``{"code": N,
"stdout": TEXT, "stderr": TEXT}`` per command, in order. The bytes travel as
UTF-8 with surrogate escapes (any byte survives the JSON line); ``"binary":
true`` keeps them so, otherwise newlines are read as ``text=True`` reads them.

Why: a test with sixty malformed config files paid sixty interpreter starts
and imports (17 s of a CI worker); a fork costs milliseconds. The child has
imported nothing but what a fresh ``python -m cronlease`` imports (cronlease, its
dependencies, the stdlib) and the database drivers, which a fresh one imports at
its first connection (a quarter of a second of each command against a server
here), and no thread or connection exists before the fork.

:class:`CliServer` keeps one such process for a test module's many short
commands (``status``, ``history``, ``pause``...): the same answer as
``subprocess.run([python, "-m", "cronlease", ...])``, for a fork instead of an
interpreter start (about a second of CPU each on the CI machine).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from cronlease.cli import main as cli_main
from tests.support.zygote import preload

TIMEOUT_SECONDS = 60


def _child(
    argv: list[str], cwd: str, env: dict[str, str], stdin_fd: int, stdout_fd: int, stderr_fd: int
) -> int:
    signal.alarm(TIMEOUT_SECONDS)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()  # a fresh interpreter reads TZ at its start
    sys.path[0] = cwd  # as ``python -m`` puts its working directory first
    importlib.invalidate_caches()
    os.dup2(stderr_fd, 2)
    # the parent's stdout is its JSON stream, its stdin the commands: neither is the child's
    os.dup2(stdin_fd, 0)
    os.dup2(stdout_fd, 1)
    try:
        return cli_main(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _text(raw: bytes, binary: bool) -> str:
    text = raw.decode("utf-8", "surrogateescape")
    return text if binary else text.replace("\r\n", "\n").replace("\r", "\n")


def run(command: dict[str, Any]) -> dict[str, Any]:
    binary = bool(command.get("binary"))
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write(command.get("stdin", "").encode("utf-8", "surrogateescape"))
        stdin.seek(0)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns into this loop
            code = 1
            try:
                code = _child(
                    command["argv"],
                    command["cwd"],
                    command["env"],
                    stdin.fileno(),
                    stdout.fileno(),
                    stderr.fileno(),
                )
            finally:
                sys.stderr.flush()
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        stdout.seek(0)
        stderr.seek(0)
        return {
            "code": os.waitstatus_to_exitcode(status),
            "stdout": _text(stdout.read(), binary),
            "stderr": _text(stderr.read(), binary),
        }


class CliServer:
    """One ``cli_forks`` process answering commands one at a time, started on first use."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        """What ``python -m cronlease ARGV`` run in ``cwd`` with ``env`` answers (text)."""
        reply = self._ask({"argv": argv, "cwd": str(cwd), "env": env})
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "cronlease", *argv],
            reply["code"],
            reply["stdout"],
            reply["stderr"],
        )

    def run_bytes(
        self, argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """The same, with ``stdin`` as its input and its output as bytes, exactly."""
        command = {"argv": argv, "cwd": str(cwd), "env": env, "binary": True}
        if stdin is not None:
            command["stdin"] = stdin.decode("utf-8", "surrogateescape")
        reply = self._ask(command)
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "cronlease", *argv],
            reply["code"],
            reply["stdout"].encode("utf-8", "surrogateescape"),
            reply["stderr"].encode("utf-8", "surrogateescape"),
        )

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "tests.support.cli_forks"],
                    cwd=self.root,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=self.env,
                )
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps(command) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        if not line:
            raise AssertionError(f"the command server ended before answering {command['argv']}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                assert self._process.stdin is not None
                self._process.stdin.close()  # EOF: the server's loop ends
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None


def main() -> None:
    preload()  # the replicas' fork server's imports (the drivers among them), once
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
