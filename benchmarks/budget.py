"""Connections a replica costs: at peak (T tasks every second, each S seconds long) and
idle (T tasks every 10 minutes, after start-up), counted by the server.

A throw-away PostgreSQL cluster (tests/support/pgcluster.py); R replica
processes of the code in ``--code`` (default this tree; ``--before DIR`` adds
the previous version, measured the same way right before), each with its own
``application_name``. Every 0.1 s the server's client connections are counted
from ``pg_stat_activity``. Reported per replica: the most at once and the mean,
at peak (a window after a warm-up) and idle (over the last 10 s of a
``--idle`` s wait: the idle timeout is 60 s; ``--idle 0`` skips it); the
connections the server authorized per replica per minute in the peak window
(``log_connections``: churn); and the runs recorded (every tick once: the
ledger files). ``--workers`` is each replica's ``max_workers`` (default 200,
so every task of a tick runs at once).

    python benchmarks/budget.py [--replicas 3] [--tasks 200] [--run 0.6] [--duration 30]
                                [--workers 200] [--idle 75] [--before /path/to/previous/tree]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path


def replica(
    code: str, url: str, prefix: str, tasks: int, every: str, run: float, ledger: str, workers: int
) -> None:
    """One replica process (``budget.py --replica CODE URL PREFIX TASKS EVERY RUN LEDGER
    WORKERS``)."""
    from _cluster import use_code

    use_code(code)
    import logging

    from cronlease import RunContext, Scheduler

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    lock = threading.Lock()
    scheduler = Scheduler(url, history_retention=None, max_workers=workers)
    for index in range(tasks):

        def work(ctx: RunContext, name: str = f"{prefix}-{index:04d}") -> None:
            with lock, open(ledger, "a") as file:
                file.write(f"{name} {ctx.slot}\n")
            if run:
                time.sleep(run)

        scheduler.add_task(work, every=every, name=f"{prefix}-{index:04d}")

    def announce() -> None:
        while not scheduler.running:
            time.sleep(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


def measure(
    cluster: object, code: Path, label: str, args: argparse.Namespace, every: str, run: float
) -> dict[str, float]:
    from _cluster import Cluster, Sampler, start_replicas, stop_replicas

    assert isinstance(cluster, Cluster)
    prefix = f"{label}-{every}-{int(time.time())}"
    folder = Path(tempfile.mkdtemp(prefix="cronlease-budget-"))
    sampler = Sampler(cluster, prefix, interval=args.interval)
    started = time.time()
    procs = start_replicas(
        __file__,
        code,
        [
            [
                cluster.url(f"{prefix}-r{i}"),
                prefix,
                str(args.tasks),
                every,
                str(run),
                str(folder / f"r{i}"),
                str(args.workers),
            ]
            for i in range(args.replicas)
        ],
    )
    up = time.time()
    if every == "1s":
        window = (up + args.warmup, up + args.warmup + args.duration)
    else:
        window = (up + args.idle - 10, up + args.idle)
    time.sleep(max(0.0, window[0] - time.time()))
    opened_before = cluster.opened(prefix)
    time.sleep(max(0.0, window[1] - time.time()))
    opened_in_window = cluster.opened(prefix) - opened_before
    errors = stop_replicas(procs)
    sampler.stop()
    samples = sampler.between(*window)
    startup = sampler.between(started, up + 5)
    names = [f"{prefix}-r{i}" for i in range(args.replicas)]
    peak = max((counts[name] for counts in samples for name in names), default=0)
    mean = statistics.fmean(counts[name] for counts in samples for name in names) if samples else 0
    total_peak = max((sum(counts.values()) for counts in samples), default=0)
    startup_peak = max((counts[name] for counts in startup for name in names), default=0)
    lines = [line.split() for path in folder.iterdir() for line in path.read_text().splitlines()]
    pairs = [(name, int(slot)) for name, slot in lines]
    shutil.rmtree(folder, ignore_errors=True)
    warnings = sum(err.count("WARNING") + err.count("ERROR") for err in errors)
    said = Counter(
        line.split(":", 2)[-1][:110]
        for err in errors
        for line in err.splitlines()
        if line.startswith(("WARNING", "ERROR"))
    )
    for line, count in said.most_common(4):
        print(f"  {label} {every}: {count} x {line}")
    return {
        "per_replica_peak": peak,
        "per_replica_mean": round(mean, 2),
        "fleet_peak": total_peak,
        "startup_peak_per_replica": startup_peak,
        "opened_per_replica_per_minute": round(
            opened_in_window / args.replicas * 60 / (window[1] - window[0]), 1
        ),
        "runs": len(pairs),
        "duplicates": len(pairs) - len(set(pairs)),
        "warnings": warnings,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replica", nargs=8)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--run", type=float, default=0.6)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--idle", type=float, default=75.0)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=200, help="max_workers per replica")
    parser.add_argument("--before", type=Path)
    parser.add_argument("--code", type=Path)
    args = parser.parse_args()
    if args.replica:
        code, url, prefix, tasks, every, run, ledger, workers = args.replica
        replica(code, url, prefix, int(tasks), every, float(run), ledger, int(workers))
        return
    from _cluster import Cluster
    from _common import ROOT, header, table

    header(
        f"connections per replica: {args.replicas} replicas x {args.tasks} tasks; peak: every "
        f"1 s, {args.run} s each, {args.duration:.0f} s window; idle: every 10 min, after "
        f"{args.idle:.0f} s"
    )
    codes = [("after", args.code or ROOT)]
    if args.before:
        codes.insert(0, ("before", args.before))
    cluster = Cluster({"max_connections": "200", "log_connections": "on"})
    rows = []
    try:
        for label, code in codes:
            peak = measure(cluster, code, label, args, "1s", args.run)
            idle = (
                measure(cluster, code, label, args, "10m", 0.0)
                if args.idle
                else {"per_replica_peak": "-", "per_replica_mean": "-", "warnings": 0}
            )
            rows.append(
                [
                    label,
                    peak["per_replica_peak"],
                    peak["per_replica_mean"],
                    peak["fleet_peak"],
                    peak["opened_per_replica_per_minute"],
                    peak["startup_peak_per_replica"],
                    idle["per_replica_peak"],
                    idle["per_replica_mean"],
                    peak["runs"],
                    peak["duplicates"],
                    peak["warnings"] + idle["warnings"],
                ]
            )
    finally:
        cluster.close()
    table(
        [
            "code",
            "peak / replica",
            "mean / replica",
            "fleet peak",
            "opened / replica / min",
            "start-up peak / replica",
            "idle / replica (max)",
            "idle mean",
            "runs",
            "duplicates",
            "warnings",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
