"""A fleet on PostgreSQL: R replica processes x T tasks every second, for D seconds.

Every replica is a real process running ``Scheduler.run_forever()`` with the
same T tasks. Each run notes (task, slot, start time) and a thread of the
replica writes those notes to a ledger table every 0.5 s in one statement
(the ledger has no unique key: a duplicate run is two rows). Within the
measured window (after every replica is up and a warm-up), reported:
duplicates, misses (a task's slot with no row), start lateness (run start
vs ``scheduled_for``) p50/p99/max, database transactions per replica per
tick (pg_stat_database of a database of its own, less the ledger's own
writes), CPU seconds per replica (from /proc, within the window) and peak
RSS per replica.

    python benchmarks/fleet.py [--replicas 8] [--tasks 500] [--duration 90] [--warmup 5] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import ROOT, header, median, percentile, pg_commits, table, url_for, write_json
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


def replica(url: str, prefix: str, tasks: int, every: str) -> None:
    """One replica process (``fleet.py --replica``)."""
    import logging

    from cronlease import RunContext, Scheduler

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

    scheduler = Scheduler(url, history_retention=None)
    for index in range(tasks):
        name = f"{prefix}-{index:04d}"

        def note(ctx: RunContext, name: str = name) -> None:
            started = time.time()
            with lock:
                notes.append({"task": name, "slot": ctx.slot, "started": started, "pid": pid})

        scheduler.add_task(note, every=every, name=name)
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
        "cpu_total": usage.ru_utime + usage.ru_stime,
        "flushes": flushes,
        "stats": scheduler.stats.snapshot(),
    }
    print("report " + json.dumps(report), flush=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run_fleet(
    url: str, replicas: int, tasks: int, duration: float, warmup: float
) -> dict[str, float]:
    engine = create_engine(url)
    LEDGER.metadata.create_all(engine)
    prefix = f"fleet-{os.getpid()}-{int(time.time())}"
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--replica", url, prefix, str(tasks)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
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
        commits_start = pg_commits(url)
        cpu_start = [cpu_seconds(proc.pid) for proc in procs]
        window_end = window_start + int(duration)
        time.sleep(max(0.0, window_end - time.time()))
        cpu_end = [cpu_seconds(proc.pid) for proc in procs]
        commits_end = pg_commits(url)
        time.sleep(1.5)  # let the last slots of the window run and their notes be written
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        line = next((row for row in out.splitlines() if row.startswith("report ")), None)
        if line is None:
            raise SystemExit(f"a replica exited {proc.returncode} without a report")
        reports.append(json.loads(line[len("report ") :]))
    with engine.connect() as conn:
        rows = conn.execute(
            select(LEDGER.c.task, LEDGER.c.slot, LEDGER.c.started).where(
                LEDGER.c.task.like(f"{prefix}-%")
            )
        ).all()
        conn.execute(LEDGER.delete().where(LEDGER.c.task.like(f"{prefix}-%")))
        conn.commit()
    engine.dispose()
    counts: dict[tuple[str, int], int] = {}
    lateness: list[float] = []
    for task, slot, started in rows:
        counts[(task, slot)] = counts.get((task, slot), 0) + 1
        if window_start * 1000 <= slot < window_end * 1000:
            lateness.append((started - slot / 1000.0) * 1000.0)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    slots = range(window_start * 1000, window_end * 1000, 1000)
    misses = sum(
        1 for i in range(tasks) for slot in slots if (f"{prefix}-{i:04d}", slot) not in counts
    )
    ledger_flushes = sum(
        1 for report in reports for at in report["flushes"] if window_start <= at < window_end + 1
    )
    ticks = window_end - window_start
    xacts = (commits_end - commits_start - ledger_flushes) / replicas / ticks
    cpu = [end - start for start, end in zip(cpu_start, cpu_end, strict=True)]
    skipped = {}
    for report in reports:
        for key, value in report["stats"].items():
            skipped[key] = skipped.get(key, 0) + value
    print(
        f"  R={replicas} T={tasks}: stats summed over replicas: "
        f"{json.dumps(skipped, sort_keys=True)}"
    )
    return {
        "duplicates": duplicates,
        "misses": misses,
        "expected_runs": tasks * ticks,
        "late_p50_ms": percentile(lateness, 0.50),
        "late_p99_ms": percentile(lateness, 0.99),
        "late_max_ms": max(lateness) if lateness else float("nan"),
        "xacts_per_replica_tick": xacts,
        "cpu_per_replica_s": median(cpu),
        "cpu_share": median(cpu) / duration,
        "rss_mb": median(report["maxrss_mb"] for report in reports),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(sys.argv[2], sys.argv[3], int(sys.argv[4]), "1s")
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--replicas", default="8", help="comma-separated: several fleet sizes in turn"
    )
    parser.add_argument("--tasks", default="500", help="comma-separated, paired with --replicas")
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    header("fleet: R replica processes x T tasks every 1 s on PostgreSQL")
    url = url_for("postgresql")
    rows = []
    figures: dict[str, float] = {}
    shapes = list(
        zip(
            [int(r) for r in args.replicas.split(",")],
            [int(t) for t in args.tasks.split(",")],
            strict=True,
        )
    )
    for replicas, tasks in shapes:
        results = [
            run_fleet(url, replicas, tasks, args.duration, args.warmup) for _ in range(args.runs)
        ]
        med = {key: median(r[key] for r in results) for key in results[0]}
        rows.append(
            [
                f"{replicas} x {tasks}",
                int(med["expected_runs"]),
                int(med["duplicates"]),
                int(med["misses"]),
                med["late_p50_ms"],
                med["late_p99_ms"],
                med["late_max_ms"],
                med["xacts_per_replica_tick"],
                med["cpu_per_replica_s"],
                f"{med['cpu_share']:.1%}",
                med["rss_mb"],
            ]
        )
        for key, value in med.items():
            figures[f"r{replicas}xt{tasks}.{key}"] = value
    table(
        [
            "R x T",
            "slots",
            "duplicates",
            "misses",
            "late p50 ms",
            "p99 ms",
            "max ms",
            "xacts/replica/tick",
            "CPU s/replica",
            "CPU share",
            "peak RSS MB",
        ],
        rows,
    )
    print(
        f"window {args.duration:.0f} s after a {args.warmup:.0f} s warm-up; "
        f"medians of {args.runs} run(s); "
        "CPU within the window, RSS over the replica's life"
    )
    write_json(args.json, "fleet", figures)


if __name__ == "__main__":
    main()
