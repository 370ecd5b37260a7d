"""Throw-away PostgreSQL 15 clusters on ports of their own, for restart and failover tests.

Run as the ``postgres`` user (``runuser``: the tests run as root), data under a
temporary directory that :meth:`Clusters.cleanup` stops and removes.
:func:`problem` says why clusters cannot be made here (then the test skips).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def problem() -> str | None:
    missing = [name for name in ("initdb", "pg_ctl", "pg_basebackup") if not (BIN / name).exists()]
    if missing:
        return f"PostgreSQL 15 binaries missing in {BIN}: {', '.join(missing)}"
    if shutil.which("runuser") is None:
        return "runuser is missing (needed to run PostgreSQL as the postgres user)"
    if os.geteuid() == 0:
        try:
            subprocess.run(["id", "postgres"], check=True, capture_output=True)
        except subprocess.CalledProcessError:
            return "no postgres user to run the clusters as"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Clusters:
    """Clusters made by one test; every one is stopped and removed by :meth:`cleanup`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cronlease-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._dirs: list[Path] = []

    def _run(self, *args: str, timeout: float = 60) -> str:
        command = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(
            command, check=True, capture_output=True, timeout=timeout, cwd=self.root, text=True
        )
        return done.stdout

    def tool(self, *args: str, timeout: float = 60) -> str:
        """Run a PostgreSQL binary (``pg_waldump``, ...) as the clusters' user; its stdout."""
        return self._run(*args, timeout=timeout)

    def _conf(self, data: Path, port: int, settings: dict[str, str] | None = None) -> None:
        with open(data / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                "synchronous_commit = off\nwal_level = replica\nmax_wal_senders = 5\n"
                "wal_receiver_timeout = 2s\nwal_retrieve_retry_interval = 500ms\n"
            )
            for name, value in (settings or {}).items():
                conf.write(f"{name} = {value}\n")

    def primary(self, port: int, settings: dict[str, str] | None = None) -> Path:
        """A new cluster on ``port``; ``settings`` are more ``postgresql.conf`` lines
        (e.g. ``{"max_connections": "10"}``). Its log is :meth:`log_of`."""
        data = self.root / f"data{port}"
        self._run("initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._conf(data, port, settings)
        self._dirs.append(data)
        self.start(data)
        return data

    def standby(self, port: int, upstream_port: int) -> Path:
        """A streaming standby of the server at ``upstream_port`` (asynchronous)."""
        data = self.root / f"data{port}"
        self._run(
            "pg_basebackup",
            "-D",
            str(data),
            "-h",
            "127.0.0.1",
            "-p",
            str(upstream_port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "--no-sync",
        )
        self._conf(data, port)
        self._dirs.append(data)
        self.start(data)
        return data

    @staticmethod
    def log_of(data: Path) -> Path:
        return Path(str(data) + ".log")

    def start(self, data: Path) -> None:
        self._run("pg_ctl", "-D", str(data), "-l", str(data) + ".log", "-w", "start")

    def restart(self, data: Path) -> None:
        """A fast restart: connections are closed, the server comes back on its port."""
        log = str(data) + ".log"
        self._run("pg_ctl", "-D", str(data), "-l", log, "-m", "fast", "-w", "restart")

    def kill(self, data: Path) -> None:
        """Stop at once, as a crash would: no checkpoint, nothing more sent to standbys."""
        self._run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")

    def promote(self, data: Path) -> None:
        self._run("pg_ctl", "-D", str(data), "-w", "promote")

    def cleanup(self) -> None:
        for data in self._dirs:
            if (data / "postmaster.pid").exists():
                with contextlib.suppress(subprocess.SubprocessError):
                    self.kill(data)
        shutil.rmtree(self.root, ignore_errors=True)
