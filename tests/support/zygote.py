"""A fork server for test processes: ``python -m MODULE ARGS`` without the interpreter start.

A process test starts replicas by the hundred, and each ``python -m
tests.support.replica`` spent about 0.6 s of CPU importing cronlease, SQLAlchemy
and the drivers before its first tick: some 200 s of a CI run's CPU on a
two-core machine, and seconds of each test's wall time waiting for "started".
``python -m tests.support.zygote SOCKET`` imports them once, then forks a child
per request. The child is a real OS process of its own (its own pid, signals,
exit status, memory, threads started after the fork), given the request's
stdin, stdout and stderr, working directory, environment (``TZ`` applied) and
``sys.argv``, and runs the module as ``__main__`` exactly as ``python -m``
would; when the module returns, the interpreter exits the usual way (non-daemon
threads joined, ``atexit`` run, streams flushed, ``SystemExit`` codes kept).

The server stays single-threaded, so no lock is held by another thread at a
fork. One thing the children share that separately started interpreters would
not: the string hash seed (``PYTHONHASHSEED``'s random default), so a set of
strings iterates in the same order in each. cronlease's choices never depend on
``hash()`` (rendezvous and jitter use their own digests); a test of something that
did would have to set ``CRONLEASE_TEST_EXEC=1``.

Protocol, over a ``SOCK_SEQPACKET`` Unix socket, one connection a child:
the request is one JSON packet ``{"module", "args", "cwd", "env"}`` carrying
three file descriptors (stdin, stdout, stderr); the server answers ``pid N``,
and ``exit N`` when the child has ended (N as ``Popen.returncode``: negative
for a signal). The server ends when its own stdin closes (its test process
exited). :class:`tests.support.procs.Proc` uses it when a plain interpreter
would start the same way (see ``procs.forkable``), and ``subprocess`` otherwise.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import socket
import sys
import time
from typing import Any

#: imported once here, so no child pays for them: what a replica script imports
PRELOAD = (
    "cronlease",
    "cronlease.store",
    "psycopg",
    "pymysql",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlalchemy.dialects.mysql.pymysql",
    "sqlalchemy.dialects.sqlite.pysqlite",
)


def preload() -> None:
    """Import :data:`PRELOAD` and freeze it (for this module's server and the CLI's)."""
    for name in PRELOAD:
        # a driver not installed: the child imports what it needs, and fails as it would
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # What every child keeps, frozen out of the collector's sight: a child's collections,
    # the one at its exit included, do not walk (and copy the pages of) all of it again.
    # A replica's exit after SIGTERM took 0.14-0.23 s, 0.03-0.09 s frozen.
    gc.collect()
    gc.freeze()


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            # OSError: the test process stopped listening, nothing to tell
            with contextlib.suppress(OSError):
                conn.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            conn.close()


def serve(path: str) -> dict[str, Any] | None:
    """Fork a child per request until stdin closes. Returns, in a child, its request."""
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        # the timeout bounds how late an exit is reported: SIGCHLD would need a handler
        readable, _, _ = select.select([listener, sys.stdin.fileno()], [], [], 0.02)
        _reap(children)
        if sys.stdin.fileno() in readable and not os.read(sys.stdin.fileno(), 4096):
            listener.close()
            return None  # the test process is gone; children it left are its to end
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        try:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            for other in children.values():
                other.close()
            conn.close()
            for fd, target in zip(fds, (0, 1, 2), strict=True):
                os.dup2(fd, target)  # dup2 makes them inheritable, as Popen's are
                os.close(fd)
            request["fds"] = None
            return dict(request)
        for fd in fds:
            os.close(fd)
        children[pid] = conn
        conn.send(f"pid {pid}".encode())


def become(request: dict[str, Any]) -> None:
    """In the forked child: the process ``python -m MODULE ARGS`` would have been."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # a fresh interpreter reads TZ at its start
    sys.path[0] = request["cwd"]  # as ``python -m`` puts its working directory first
    importlib.invalidate_caches()
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    job = serve(sys.argv[1])
    if job is not None:
        become(job)
