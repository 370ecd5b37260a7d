"""Many ``cronlease`` commands, each a process of its own, for one interpreter start.

``python -m tests.support.cli_forks`` reads JSON lines ``{"argv": [...], "cwd":
DIR, "env": {...}}`` from stdin until EOF. It imports the CLI once, then for
each line forks a child that does what ``python -m cronlease ARGV`` run in
``cwd`` with exactly ``env`` does: its own working directory, environment,
``sys.path[0]``, stderr (a file) and exit status (its stdin and stdout are
``/dev/null``). It prints one JSON line
``{"code": N, "stderr": TEXT}`` per command, in order.

Why: a test with sixty malformed config files paid sixty interpreter starts
and imports (17 s of a CI worker); a fork costs milliseconds. The child has
imported nothing a fresh ``python -m cronlease`` would not (cronlease, its
dependencies, the stdlib), and no thread or connection exists before the fork.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback
from typing import Any

from cronlease.cli import main as cli_main


def _child(argv: list[str], cwd: str, env: dict[str, str], stderr_fd: int) -> int:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[0] = cwd  # as ``python -m`` puts its working directory first
    importlib.invalidate_caches()
    os.dup2(stderr_fd, 2)
    # stdout is the parent's JSON stream, stdin its commands: neither is the child's
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
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


def run(command: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile(mode="w+") as stderr:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns into this loop
            code = 1
            try:
                code = _child(command["argv"], command["cwd"], command["env"], stderr.fileno())
            finally:
                sys.stderr.flush()
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        stderr.seek(0)
        return {"code": os.waitstatus_to_exitcode(status), "stderr": stderr.read()}


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
