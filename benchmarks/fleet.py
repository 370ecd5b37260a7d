"""A fleet on PostgreSQL: R replica processes x T tasks every second, several fleet sizes.

Every replica is a real process running ``Scheduler.run_forever()`` with the
same T tasks. Each run notes (task, slot, start time) and a thread of the
replica writes those notes to a ledger table every 0.5 s in one statement
(the ledger has no unique key: a duplicate run is two rows).

The fleet runs on a throw-away PostgreSQL cluster of its own
(tests/support/pgcluster.py: ``fsync = off``, ``max_connections = 600``), so
that every process of the cluster is the benchmark's and 64 replicas do not
exhaust the shared server's 100 connections. Within the measured window
(after every replica is up and a warm-up), per fleet size:

- **PostgreSQL CPU per tick**: user + system CPU of every process of the
  cluster (the postmaster's children from /proc, plus the postmaster's own and
  its reaped children's), over the window, per tick;
- **transactions per tick**: pg_stat_database of the bench database (commits +
  rollbacks), less the ledger's own flushes, for the whole fleet;
- **statements per tick by kind** (``pg_stat_statements``, loaded in the cluster):
  membership renewals, slot checks, acquisitions, finishes, lease renewals, and
  the rest of cronlease's (``BEGIN``/``COMMIT`` of SQLAlchemy's transactions,
  housekeeping reads); the ledger's are left out;
- **row locks per tick**: WAL records of the window (``pg_waldump --stats``)
  that take a row lock: ``Heap/LOCK`` (a lock without a change: a refused
  ``ON CONFLICT DO UPDATE``, a ``FOR UPDATE``) plus ``Heap/UPDATE`` and
  ``Heap/HOT_UPDATE`` (every update locks its row) — the ledger only inserts,
  so these are cronlease's; lease-row updates (pg_stat_user_tables) are shown
  too;
- runs per replica (min / median / max, as a multiple of the fair share
  T x ticks / R), duplicates, misses, start lateness (run start vs the slot)
  p50 / p99 / max, and replica CPU (from /proc, within the window).

Every figure is also printed as a ratio to the first fleet size's.

    python benchmarks/fleet.py [--replicas 8,32,64] [--tasks 200] [--duration 50]
        [--warmup 8] [--workers 200] [--code DIR] [--active K] [--json FILE]

``--code DIR`` runs the replicas on the cronlease package found in DIR (e.g. a
checkout of main, for before/after figures); the default is this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import ROOT, header, median, percentile, table, write_json
from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    select,
    text,
)

LEDGER = Table(
    "cronlease_bench_ledger",
    MetaData(),
    Column("task", String(255), nullable=False),
    Column("slot", BigInteger, nullable=False),
    Column("started", Double, nullable=False),
    Column("pid", Integer, nullable=False),
)
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOCKING_RECORDS = ("Heap/LOCK", "Heap/UPDATE", "Heap/HOT_UPDATE")
CLUSTER_CONF = {
    "max_connections": "600",
    "shared_buffers": "128MB",
    # the window's WAL must still be there for pg_waldump when it ends
    "wal_keep_size": "4096",
    "max_wal_size": "4GB",
    # statements counted by kind
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "5000",
}
#: statement kinds counted per tick (pg_stat_statements), in the table's order
KINDS = ("membership", "slot_checks", "acquisitions", "finishes", "lease_renewals", "other")


def kind_of(query: str) -> str | None:
    """A statement's kind (None: the ledger's, or the benchmark's own reads)."""
    if "cronlease_bench_ledger" in query or "pg_stat" in query or "pg_current_wal" in query:
        return None
    if "cronlease_members" in query:
        return "membership"
    if "INSERT INTO cronlease_leases" in query:
        return "acquisitions"
    if "cronlease_runs" in query and "released" in query:
        return "finishes"
    if "UPDATE cronlease_leases" in query:
        return "lease_renewals"
    if "cronlease_leases" in query and query.lstrip().upper().startswith("SELECT"):
        return "slot_checks"
    return "other"


def replica(code: str, url: str, prefix: str, tasks: int, workers: int, active: int) -> None:
    """One replica process (``fleet.py --replica``)."""
    sys.path.insert(0, code)
    import logging

    from cronlease import RunContext, Scheduler

    if active >= 0:  # a variant of the rendezvous: at most ``active`` members per instant
        from cronlease._run.acquisition import rendezvous

        rendezvous.ACTIVE_PER_TICK = active

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    notes: list[dict[str, object]] = []
    lock = threading.Lock()
    flushes: list[float] = []
    pid = os.getpid()
    engine = create_engine(url, pool_size=1)

    def flush() -> None:
        with lock:
            batch, notes[:] = list(notes), []
        if batch:
            with engine.begin() as conn:
                conn.execute(LEDGER.insert(), batch)
            flushes.append(time.time())

    stop = threading.Event()

    def flusher() -> None:
        while not stop.wait(0.5):
            flush()

    scheduler = Scheduler(url, history_retention=None, max_workers=workers)
    for index in range(tasks):
        name = f"{prefix}-{index:04d}"

        def note(ctx: RunContext, name: str = name) -> None:
            started = time.time()
            with lock:
                notes.append({"task": name, "slot": ctx.slot, "started": started, "pid": pid})

        scheduler.add_task(note, every="1s", name=name)
    threading.Thread(target=flusher, daemon=True).start()

    def announce() -> None:
        while not scheduler.running:
            time.sleep(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()
    stop.set()
    flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "maxrss_mb": usage.ru_maxrss / 1024,
        "flushes": flushes,
        "stats": scheduler.stats.snapshot(),
    }
    print("report " + json.dumps(report), flush=True)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    try:
        fields = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cluster_cpu(postmaster: int) -> float:
    """CPU seconds of the whole cluster so far: the postmaster (with the children it
    reaped) and every live child."""
    fields = _stat(postmaster)
    total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


class Cluster:
    """The benchmark's own PostgreSQL cluster, and what it measures."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.support import pgcluster

        problem = pgcluster.problem()
        if problem:
            raise SystemExit(f"cannot make a PostgreSQL cluster here: {problem}")
        self._clusters = pgcluster.Clusters()
        self.port = pgcluster.free_port()
        self.data = self._clusters.primary(self.port, settings or CLUSTER_CONF)
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._engine = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_size=1)
        with self._engine.connect() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))

    @property
    def postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def close(self) -> None:
        self._engine.dispose()
        self._clusters.cleanup()

    def counters(self) -> dict[str, Any]:
        with self._engine.connect() as conn:
            xacts = conn.execute(
                text(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database"
                    " WHERE datname = current_database()"
                )
            ).scalar_one()
            tables = {
                row[0]: (int(row[1]), int(row[2]), int(row[3]))
                for row in conn.execute(
                    text(
                        "SELECT relname, n_tup_upd, n_tup_hot_upd, n_tup_ins"
                        " FROM pg_stat_user_tables"
                        " WHERE relname IN ('cronlease_leases', 'cronlease_runs')"
                    )
                )
            }
            lsn = conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one()
            kinds = dict.fromkeys(KINDS, 0)
            for query, calls in conn.execute(
                text(
                    "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d"
                    " ON d.oid = s.dbid WHERE d.datname = current_database()"
                )
            ):
                kind = kind_of(str(query))
                if kind is not None:
                    kinds[kind] += int(calls)
        return {
            "xacts": int(xacts),
            "tables": tables,
            "lsn": str(lsn),
            "cpu": 0.0,
            "statements": kinds,
        }

    def wal_records(self, start: str, end: str) -> dict[str, int]:
        out = self._clusters.tool(
            "pg_waldump", "--stats=record", "-p", str(self.data / "pg_wal"), "-s", start, "-e", end
        )
        counts: dict[str, int] = {}
        for line in out.splitlines():
            match = re.match(r"^(\S+/\S+)\s+(\d+)\s", line)
            if match:
                counts[match.group(1)] = int(match.group(2))
        return counts


def run_fleet(
    cluster: Cluster,
    code: str,
    replicas: int,
    tasks: int,
    duration: float,
    warmup: float,
    workers: int,
    active: int,
) -> dict[str, float]:
    url = cluster.url
    engine = create_engine(url)
    LEDGER.metadata.create_all(engine)
    prefix = f"fleet-{replicas}-{int(time.time())}"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--replica",
                code,
                url,
                prefix,
                str(tasks),
                str(workers),
                str(active),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": code},
        )
        for _ in range(replicas)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("started"):
                raise SystemExit(f"a replica did not start: {line!r}")
        window_start = int(time.time() + warmup) + 1
        time.sleep(max(0.0, window_start - time.time()))
        before = cluster.counters()
        before["cpu"] = cluster_cpu(cluster.postmaster)
        cpu_start = [cpu_seconds(proc.pid) for proc in procs]
        window_end = window_start + int(duration)
        time.sleep(max(0.0, window_end - time.time()))
        cpu_end = [cpu_seconds(proc.pid) for proc in procs]
        after = cluster.counters()
        after["cpu"] = cluster_cpu(cluster.postmaster)
        time.sleep(1.5)  # let the last slots of the window run and their notes be written
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        line = next((row for row in out.splitlines() if row.startswith("report ")), None)
        if line is None:
            raise SystemExit(f"a replica exited {proc.returncode} without a report")
        reports.append(json.loads(line[len("report ") :]))
    pids = [proc.pid for proc in procs]
    with engine.connect() as conn:
        rows = conn.execute(
            select(LEDGER.c.task, LEDGER.c.slot, LEDGER.c.started, LEDGER.c.pid).where(
                LEDGER.c.task.like(f"{prefix}-%")
            )
        ).all()
        conn.execute(LEDGER.delete().where(LEDGER.c.task.like(f"{prefix}-%")))
        conn.commit()
    engine.dispose()
    wal = cluster.wal_records(before["lsn"], after["lsn"])
    counts: dict[tuple[str, int], int] = {}
    lateness: list[float] = []
    per_replica = dict.fromkeys(pids, 0)
    for task, slot, started, pid in rows:
        counts[(task, slot)] = counts.get((task, slot), 0) + 1
        if window_start * 1000 <= slot < window_end * 1000:
            lateness.append((started - slot / 1000.0) * 1000.0)
            per_replica[pid] = per_replica.get(pid, 0) + 1
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    slots = range(window_start * 1000, window_end * 1000, 1000)
    misses = sum(
        1 for i in range(tasks) for slot in slots if (f"{prefix}-{i:04d}", slot) not in counts
    )
    ledger_flushes = sum(
        1 for report in reports for at in report["flushes"] if window_start <= at < window_end + 1
    )
    ticks = window_end - window_start
    fair = tasks * ticks / replicas
    shares = sorted(per_replica[pid] / fair for pid in pids)
    cpu = [end - start for start, end in zip(cpu_start, cpu_end, strict=True)]
    leases_before = before["tables"].get("cronlease_leases", (0, 0, 0))
    leases_after = after["tables"].get("cronlease_leases", (0, 0, 0))
    stats: dict[str, int] = {}
    for report in reports:
        for key, value in report["stats"].items():
            stats[key] = stats.get(key, 0) + value
    print(
        f"  R={replicas} T={tasks}: stats summed over replicas: {json.dumps(stats, sort_keys=True)}"
    )
    print(f"  R={replicas}: WAL records in the window: {json.dumps(wal, sort_keys=True)}")
    return {
        "duplicates": duplicates,
        "misses": misses,
        "expected_runs": tasks * ticks,
        "pg_cpu_ms_per_tick": (after["cpu"] - before["cpu"]) / ticks * 1000,
        "xacts_per_tick": (after["xacts"] - before["xacts"] - ledger_flushes) / ticks,
        "row_locks_per_tick": sum(wal.get(kind, 0) for kind in LOCKING_RECORDS) / ticks,
        "lock_only_per_tick": wal.get("Heap/LOCK", 0) / ticks,
        "lease_updates_per_tick": (leases_after[0] - leases_before[0]) / ticks,
        **{
            f"{kind}_per_tick": (after["statements"][kind] - before["statements"][kind]) / ticks
            for kind in KINDS
        },
        "runs_share_min": shares[0],
        "runs_share_median": median(shares),
        "runs_share_max": shares[-1],
        "late_p50_ms": percentile(lateness, 0.50),
        "late_p99_ms": percentile(lateness, 0.99),
        "late_max_ms": max(lateness) if lateness else float("nan"),
        "replica_cpu_ms_per_tick": sum(cpu) / ticks * 1000,
        "cpu_per_replica_s": median(cpu),
        "rss_mb": median(report["maxrss_mb"] for report in reports),
    }


ROWS = [
    ("duplicates", "duplicates"),
    ("misses", "misses"),
    ("slots", "expected_runs"),
    ("PostgreSQL CPU ms/tick", "pg_cpu_ms_per_tick"),
    ("transactions/tick (fleet)", "xacts_per_tick"),
    ("row locks/tick (WAL LOCK+UPDATE)", "row_locks_per_tick"),
    ("  of which lock-only (Heap/LOCK)", "lock_only_per_tick"),
    ("lease-row updates/tick", "lease_updates_per_tick"),
    ("membership statements/tick", "membership_per_tick"),
    ("slot checks/tick", "slot_checks_per_tick"),
    ("acquisitions/tick", "acquisitions_per_tick"),
    ("finishes/tick", "finishes_per_tick"),
    ("lease renewals/tick", "lease_renewals_per_tick"),
    ("other cronlease statements/tick", "other_per_tick"),
    ("runs/replica min (x fair share)", "runs_share_min"),
    ("runs/replica median (x fair)", "runs_share_median"),
    ("runs/replica max (x fair)", "runs_share_max"),
    ("start lateness p50 ms", "late_p50_ms"),
    ("start lateness p99 ms", "late_p99_ms"),
    ("start lateness max ms", "late_max_ms"),
    ("replica CPU ms/tick (fleet)", "replica_cpu_ms_per_tick"),
    ("replica CPU s (median, window)", "cpu_per_replica_s"),
    ("peak RSS MB (median)", "rss_mb"),
]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(
            sys.argv[2],
            sys.argv[3],
            sys.argv[4],
            int(sys.argv[5]),
            int(sys.argv[6]),
            int(sys.argv[7]),
        )
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="8,32,64", help="comma-separated fleet sizes")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--duration", type=float, default=50.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument(
        "--workers", type=int, default=200, help="max_workers per replica (default: T)"
    )
    parser.add_argument("--code", default=str(ROOT), help="where the replicas import cronlease")
    parser.add_argument(
        "--active",
        type=int,
        default=-1,
        help="variant: rendezvous.ACTIVE_PER_TICK in the replicas (0: every member; "
        "default: the code's own)",
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    header("fleet: R replica processes x T tasks every 1 s on a PostgreSQL cluster of its own")
    code = str(Path(args.code).resolve())
    print(f"cronlease from: {code}")
    sizes = [int(r) for r in args.replicas.split(",")]
    cluster = Cluster()
    results: dict[int, dict[str, float]] = {}
    try:
        for replicas in sizes:
            results[replicas] = run_fleet(
                cluster,
                code,
                replicas,
                args.tasks,
                args.duration,
                args.warmup,
                args.workers,
                args.active,
            )
    finally:
        cluster.close()
    base = results[sizes[0]]
    headers = ["figure", *(f"R={r}" for r in sizes), *(f"R={r} / R={sizes[0]}" for r in sizes[1:])]
    rows = []
    for label, key in ROWS:
        values = [results[r][key] for r in sizes]
        ratios = [results[r][key] / base[key] if base[key] else float("nan") for r in sizes[1:]]
        rows.append([label, *values, *(f"{ratio:.2f}x" for ratio in ratios)])
    table(headers, rows)
    print(
        f"T={args.tasks} tasks every 1 s, max_workers={args.workers}, active={args.active}; "
        f"window {args.duration:.0f} s "
        f"after a {args.warmup:.0f} s warm-up, one run per size; CPU within the window"
    )
    figures = {
        f"r{r}xt{args.tasks}.{key}": value for r in sizes for key, value in results[r].items()
    }
    write_json(args.json, "fleet", figures)


if __name__ == "__main__":
    main()
