"""Shared by budget.py and storm.py: a throw-away PostgreSQL cluster, replica processes
running some cronlease tree, and the server's connections counted by application name.

The replicas' own code is ``--code DIR`` (default: this tree), so one script
measures the previous version and this one side by side: the replica process
puts DIR first on ``sys.path`` before importing cronlease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO

from _common import ROOT
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.support import pgcluster

ROLE = "bench"
_STDERR: dict[int, IO[str]] = {}


class Cluster:
    """One PostgreSQL 15 cluster of its own with ``settings``; a non-superuser role
    ``bench`` for the replicas (superusers keep the reserved slots for counting)."""

    def __init__(self, settings: dict[str, str]) -> None:
        problem = pgcluster.problem()
        if problem:
            raise SystemExit(problem)
        self.clusters = pgcluster.Clusters()
        self.port = pgcluster.free_port()
        self.data = self.clusters.primary(self.port, settings)
        self.admin = create_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres",
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
        )
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {ROLE} LOGIN")
            conn.exec_driver_sql(f"GRANT CREATE ON SCHEMA public TO {ROLE}")

    def url(self, application_name: str) -> str:
        return (
            f"postgresql://{ROLE}@127.0.0.1:{self.port}/postgres"
            f"?application_name={application_name}"
        )

    def connections(self, prefix: str) -> Counter[str]:
        """Client connections of the role now, by application name (those starting ``prefix``)."""
        with self.admin.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE usename = :role AND application_name LIKE :prefix "
                    "GROUP BY application_name"
                ),
                {"role": ROLE, "prefix": f"{prefix}%"},
            ).all()
        return Counter({name: int(count) for name, count in rows})

    def opened(self, prefix: str) -> int:
        """Connections the server authorized so far for application names starting
        ``prefix`` (its log, with ``log_connections = on``)."""
        log = self.clusters.log_of(self.data).read_text(errors="replace")
        needle = f"application_name={prefix}"
        return sum("connection authorized" in line and needle in line for line in log.splitlines())

    def fatal_lines(self) -> int:
        log = self.clusters.log_of(self.data)
        return sum("FATAL:" in line for line in log.read_text(errors="replace").splitlines())

    def close(self) -> None:
        self.admin.dispose()
        self.clusters.cleanup()


class Sampler:
    """Counts the server's connections every ``interval`` seconds in a thread."""

    def __init__(self, cluster: Cluster, prefix: str, interval: float = 0.1) -> None:
        self.samples: list[tuple[float, Counter[str]]] = []
        self._stop = threading.Event()

        def run() -> None:
            while not self._stop.wait(interval):
                self.samples.append((time.time(), cluster.connections(prefix)))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def between(self, start: float, end: float) -> list[Counter[str]]:
        return [counts for at, counts in self.samples if start <= at < end]


def start_replicas(
    script: str, code: Path, arguments: list[list[str]], *, wait: bool = True
) -> list[subprocess.Popen[str]]:
    """One process per argument list (``python SCRIPT --replica CODE ARGS...``); stderr
    goes to a temporary file each (a pipe nobody reads would block a chatty replica)."""
    procs = []
    for args in arguments:
        errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (read by stop_replicas)
        proc = subprocess.Popen(
            [sys.executable, script, "--replica", str(code), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{ROOT}"},
        )
        _STDERR[proc.pid] = errors
        procs.append(proc)
    if wait:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("started"):
                raise SystemExit(f"a replica did not start: {line!r} {stderr_of(proc)}")
    return procs


def stop_replicas(procs: list[subprocess.Popen[str]]) -> list[str]:
    """SIGTERM each; their stderr."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    errors = []
    for proc in procs:
        proc.communicate(timeout=60)
        errors.append(stderr_of(proc))
    return errors


def stderr_of(proc: subprocess.Popen[str]) -> str:
    errors = _STDERR[proc.pid]
    errors.seek(0)
    return errors.read()


def use_code(code: str) -> None:
    """In a replica process: import cronlease from ``code``."""
    sys.path[:0] = [code]
