"""Real PgBouncer instances in front of the test PostgreSQL server, started by the tests.

:func:`start` runs ``pgbouncer`` (Debian's package: ``/usr/sbin/pgbouncer``) in
the foreground as a child process, with a config written to a temporary
directory of its own: a free loopback port, no Unix socket, ``auth_type =
trust`` with an auth file naming the server's user, the pid file and log
file in that directory. :meth:`Bouncer.stop` ends the process and removes the
directory. PgBouncer refuses to run as root: when the tests do (CI), it is
told to switch to the ``postgres`` user, who owns the directory.

PgBouncer 1.18 refuses the ``options`` startup parameter the run's
PostgreSQL URL isolates itself with (``-csearch_path=<schema>``,
tests/support/databases.py), so a bouncer serves one database instead: the
run's own, created on the server by :func:`databases.postgres_database` and
named in the config (``[databases]``), dropped at the end of the session.

Both pools point at the same database: a transaction-mode pool that is small
and hands out its server connections in turn (``server_round_robin``), so a
client relying on anything left on a server connection between two
transactions — a prepared statement, a ``SET`` — meets another connection on
its next transaction; and a session-mode pool large enough for every client
connection the tests open at once (in session mode a client keeps its server
connection until it disconnects; one more waits).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

MODES = ("transaction", "session")
# per mode: server connections per (database, user) pair
POOL_SIZES = {"transaction": 4, "session": 60}
CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def executable() -> str | None:
    """``CRONLEASE_TEST_PGBOUNCER`` if set, else ``pgbouncer`` on the PATH or in /usr/sbin."""
    given = os.environ.get("CRONLEASE_TEST_PGBOUNCER")
    if given is not None:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("pgbouncer")
    if found is not None:
        return found
    return next((path for path in CANDIDATES if os.access(path, os.X_OK)), None)


def problem() -> str | None:
    """Why PgBouncer cannot be started here, or None."""
    if executable() is None:
        given = os.environ.get("CRONLEASE_TEST_PGBOUNCER")
        if given is not None:
            return f"CRONLEASE_TEST_PGBOUNCER={given} is not an executable"
        return "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "pgbouncer refuses to run as root, and there is no postgres user to run it as"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


@dataclass
class Bouncer:
    """One running PgBouncer, serving ``database`` in ``mode``."""

    mode: str
    database: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    user: str

    def url(self, database: str | None = None, **query: str) -> str:
        """A URL of ``database`` (default: the run's) through this bouncer, named for the
        run's connections (``application_name``) and with ``query`` added."""
        url = make_url(
            f"postgresql://{self.user}@127.0.0.1:{self.port}/{database or self.database}"
        )
        url = url.update_query_dict({"application_name": self.database, **query})
        return url.render_as_string(hide_password=False)

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """End the process (SIGTERM, then SIGKILL) and remove its directory."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _config(mode: str, database: str, server: str, port: int, directory: Path) -> str:
    url = make_url(server)
    user = url.username or "postgres"
    server_at = f"host={url.host or '127.0.0.1'} port={url.port or 5432}"
    lines = [
        "[databases]",
        f"{database} = {server_at} dbname={database}",
        # any other database name: the server's database of that name (a test's scratch one)
        f"* = {server_at}",
        "",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {directory / 'users.txt'}",
        f"pidfile = {directory / 'pgbouncer.pid'}",
        f"logfile = {directory / 'pgbouncer.log'}",
        f"pool_mode = {mode}",
        f"default_pool_size = {POOL_SIZES[mode]}",
        "max_client_conn = 500",
        # the least recently used server connection first: consecutive transactions of
        # one client land on different server connections
        "server_round_robin = 1",
        # a client waiting this long for a server connection fails, visibly
        "query_wait_timeout = 30",
        f"admin_users = {user}",  # SHOW POOLS on the console, database pgbouncer
        "log_connections = 0",
        "log_disconnections = 0",
    ]
    if os.geteuid() == 0:
        lines.append("user = postgres")
    return "\n".join(lines) + "\n"


def start(mode: str, database: str, server: str) -> Bouncer:
    """A PgBouncer in ``mode`` for ``database`` on the server of the URL ``server``.

    The user and password of ``server`` are the ones the clients give (auth file) and
    PgBouncer passes on to the server.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    binary = executable()
    assert binary is not None, problem()
    server_url = make_url(server)
    user = server_url.username or "postgres"
    directory = Path(tempfile.mkdtemp(prefix=f"cronlease-pgbouncer-{mode}-"))
    try:
        (directory / "users.txt").write_text(
            f"{_quote(user)} {_quote(server_url.password or '')}\n"
        )
        if os.geteuid() == 0:
            for path in (directory, directory / "users.txt"):
                shutil.chown(path, "postgres", "postgres")
        last = ""
        for _ in range(3):  # a free port can be taken between probe and listen
            port = free_port()
            (directory / "pgbouncer.ini").write_text(
                _config(mode, database, server, port, directory)
            )
            process = subprocess.Popen(
                [binary, str(directory / "pgbouncer.ini")],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            bouncer = Bouncer(mode, database, port, directory, process, user)
            if _listening(bouncer):
                return bouncer
            last = bouncer.log()
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
        raise RuntimeError(f"pgbouncer ({mode}) did not start:\n{last[-2000:]}")
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def warm(bouncer: Bouncer, connections: int) -> None:
    """Open ``connections`` server connections in the bouncer's pool (transaction mode):
    as many clients each in a transaction at once, then all done. PgBouncer opens a
    server connection only when no idle one is free, so a lone client would otherwise
    meet the same one every time, round robin or not."""
    clients = [psycopg.connect(bouncer.url(), connect_timeout=10) for _ in range(connections)]
    try:
        for client in clients:
            client.execute("SELECT 1")  # psycopg opened a transaction: the server stays
        for client in clients:
            client.commit()
    finally:
        for client in clients:
            client.close()


def _listening(bouncer: Bouncer, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bouncer.process.poll() is not None:
            return False
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", bouncer.port), timeout=1),
        ):
            return True
        time.sleep(0.02)
    return False
