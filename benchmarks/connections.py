"""Connections a fleet costs: N idle-sized replicas on a PostgreSQL with a small max_connections.

A throw-away PostgreSQL 15 cluster (tests/support/pgcluster.py) is started
with ``--max-connections`` (default 100); N replica processes
(``Scheduler.run_forever()``) each declare the same five tasks, every 1, 2, 3,
5 and 10 s, and start together (a cold start is the storm). With
``--pgbouncer MODE`` they connect through a PgBouncer in that pooling mode
(``transaction`` or ``session``) instead of directly.

Each run appends ``task slot`` to a file of its replica's own (the ledger: no
database connection of its own, so the connections counted are cronlease's).
Every 0.5 s the server's client connections are counted from
``pg_stat_activity``. Reported for the measured window (after every replica
is up and a warm-up): every slot of every task once (duplicates, misses),
connections in use (mean and peak, total and per replica), the server log's
FATAL lines, and the WARNING/ERROR lines in the replicas' logs.

    python benchmarks/connections.py [--replicas 80] [--max-connections 100] [--duration 60]
    python benchmarks/connections.py --replicas 200 --pgbouncer transaction
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import ROOT, header, table
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

#: (task name, seconds between ticks): "a few tasks each, every 1-10 s"
TASKS = [("every-1s", 1), ("every-2s", 2), ("every-3s", 3), ("every-5s", 5), ("every-10s", 10)]
APP_PREFIX = "cl-conn-"


def replica(url: str, ledger: str) -> None:
    """One replica process (``connections.py --replica URL LEDGER``)."""
    import logging

    from cronlease import RunContext, Scheduler

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    scheduler = Scheduler(url, history_retention=None)
    for name, seconds in TASKS:

        def note(ctx: RunContext, name: str = name) -> None:
            os.write(fd, f"{name} {ctx.slot}\n".encode())

        scheduler.add_task(note, every=f"{seconds}s", name=name)

    def announce() -> None:
        while not scheduler.running:
            time.sleep(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


def start_cluster(root: Path, max_connections: int) -> tuple[object, Path, int]:
    from tests.support.pgcluster import Clusters, free_port

    clusters = Clusters()
    port = free_port()
    data = clusters.primary(port)
    with open(data / "postgresql.auto.conf", "a") as conf:
        conf.write(f"max_connections = {max_connections}\nlog_min_messages = warning\n")
    clusters.restart(data)
    return clusters, data, port


def start_pgbouncer(root: Path, server_port: int, mode: str) -> tuple[subprocess.Popen[str], int]:
    from tests.support.pgcluster import free_port

    port = free_port()
    (root / "users.txt").write_text('"postgres" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={server_port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root / 'users.txt'}\n"
        f"pool_mode = {mode}\nmax_client_conn = 2000\ndefault_pool_size = 20\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
    )
    if os.geteuid() == 0:
        import shutil

        shutil.chown(root, "postgres", "postgres")  # its log file
    command = ["pgbouncer", str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        command = ["runuser", "-u", "postgres", "--", *command]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )
    deadline = time.monotonic() + 30
    probe = create_engine(
        f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", poolclass=NullPool
    )
    while True:
        try:
            with probe.connect() as conn:
                conn.execute(text("SELECT 1"))
            break
        except Exception as exc:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(
                    "PgBouncer did not start: see " + str(root / "pgbouncer.log")
                ) from exc
            time.sleep(0.2)
    probe.dispose()
    return proc, port


class Sampler:
    """Counts the server's client connections every 0.5 s while the window is open.

    Its connection is made before the replicas start: on a full server it
    could not connect later.
    """

    def __init__(self, admin_url: str) -> None:
        self._engine = create_engine(admin_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self._conn = self._engine.connect()
        self.samples: list[tuple[float, int, dict[str, int]]] = []
        self._open = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def open_window(self) -> None:
        self._open.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()
        self._engine.dispose()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            if not self._open.is_set():
                continue
            rows = self._conn.execute(
                text(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
                    "GROUP BY 1"
                )
            ).all()
            per_app = {str(name): int(count) for name, count in rows}
            self.samples.append((time.time(), sum(per_app.values()), per_app))


def run(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="cronlease-conn-"))
    clusters, data, server_port = start_cluster(root, args.max_connections)
    bouncer: subprocess.Popen[str] | None = None
    procs: list[subprocess.Popen[str]] = []
    logs: list[Path] = []
    try:
        port = server_port
        if args.pgbouncer:
            bouncer, port = start_pgbouncer(root, server_port, args.pgbouncer)
        admin = f"postgresql+psycopg://postgres@127.0.0.1:{server_port}/postgres"
        # the tables exist before the storm, as after any first deploy
        from cronlease._lease.store import LeaseStore

        store = LeaseStore.from_url(admin)
        store.create_tables()
        store.dispose()
        sampler = Sampler(admin)
        for index in range(args.replicas):
            url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            if not args.pgbouncer:  # PgBouncer would show its own server connections' names
                url += f"?application_name={APP_PREFIX}{index}"
            log = root / f"replica-{index}.log"
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--replica", url, str(root / f"ledger-{index}")],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=log.open("w"),
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            )
        started_at = time.monotonic()
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("started"):
                raise SystemExit(f"a replica did not start: {line!r}")
        startup = time.monotonic() - started_at
        window_start = int(time.time() + args.warmup) + 1
        time.sleep(max(0.0, window_start - time.time()))
        sampler.open_window()
        window_end = window_start + int(args.duration)
        time.sleep(max(0.0, window_end - time.time()))
        sampler.stop()
        time.sleep(2.0)  # the window's last runs write their lines
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        if bouncer is not None:
            bouncer.terminate()
            bouncer.wait(timeout=30)
        server_log = Path(str(data) + ".log").read_text(errors="replace")
        clusters.cleanup()  # type: ignore[attr-defined]
    counts: dict[tuple[str, int], int] = {}
    ran = 0  # replicas that ran at least one task in their life
    for index in range(args.replicas):
        path = root / f"ledger-{index}"
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        ran += bool(lines)
        for line in lines:
            name, slot = line.split()
            counts[(name, int(slot))] = counts.get((name, int(slot)), 0) + 1
    expected = [
        (name, slot)
        for name, seconds in TASKS
        for slot in range(window_start * 1000, window_end * 1000, 1000)
        if slot % (seconds * 1000) == 0
    ]
    duplicates = sum(counts.get(key, 0) - 1 for key in expected if counts.get(key, 0) > 1)
    misses = sum(1 for key in expected if key not in counts)
    warnings = [
        line
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line or "Traceback" in line
    ]
    totals = [total for _, total, _ in sampler.samples]
    per_replica_peak = max(
        (
            count
            for _, _, apps in sampler.samples
            for app, count in apps.items()
            if app.startswith(APP_PREFIX)
        ),
        default=0,
    )
    fatal = sum(1 for line in server_log.splitlines() if "FATAL" in line)
    via = f"PgBouncer ({args.pgbouncer} pooling)" if args.pgbouncer else "directly"
    print(
        f"{args.replicas} replicas {via}, max_connections={args.max_connections}, "
        f"window {args.duration:.0f} s after a {args.warmup:.0f} s warm-up; "
        f"all replicas up {startup:.1f} s after the first was started"
    )
    table(
        [
            "slots",
            "duplicates",
            "misses",
            "server conns mean",
            "peak",
            "per replica mean",
            "per replica peak",
            "FATAL lines",
            "replica WARNING/ERROR lines",
            "replicas that ran a task",
        ],
        [
            [
                len(expected),
                duplicates,
                misses,
                sum(totals) / max(1, len(totals)),
                max(totals, default=0),
                sum(totals) / max(1, len(totals)) / args.replicas,
                per_replica_peak if not args.pgbouncer else "-",
                fatal,
                len(warnings),
                ran,
            ]
        ],
    )
    for line in warnings[:10]:
        print("  " + line)
    if args.keep:
        print(f"logs kept in {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=80)
    parser.add_argument("--max-connections", type=int, default=100)
    parser.add_argument("--pgbouncer", choices=["transaction", "session"])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--keep", action="store_true", help="keep the logs and ledgers")
    args = parser.parse_args()
    header("connections: N idle-sized replicas on one PostgreSQL")
    run(args)


if __name__ == "__main__":
    main()
