"""An idle fleet: R replicas x 10 tasks every minute, what the database pays between ticks.

Every replica is a real process running ``Scheduler.run_forever()`` with the
same T tasks every 60 s (on the minute, as ``* * * * *``), default settings
but no history retention. The fleet runs on a throw-away PostgreSQL cluster of
its own (tests/support/pgcluster.py) with ``pg_stat_statements``, so every
statement is counted by the server, not by the replicas. Measured over M whole
minutes (from 5 s past a minute to 5 s past another: each window holds M tick
instants), per tree of cronlease (``--before DIR``: another checkout, measured
the same way in the same sitting, first):

- **statements per replica per minute** by kind: the membership's (any
  statement on ``cronlease_members``), the ticks' (on ``cronlease_leases`` /
  ``cronlease_runs``: acquisitions, slot checks, finishes, the stuck watcher's
  sweep), and the rest (the clock check...). "Between ticks" is everything but
  the ticks' own: what the fleet costs while nothing is due;
- **PostgreSQL CPU**: user + system CPU of every process of the cluster over
  the window, as ms per minute and s per hour;
- replica CPU per replica per minute (from /proc), and the ticks: runs, duplicates,
  misses in the window (from ``cronlease_runs``).

    python benchmarks/idle_fleet.py [--replicas 64] [--tasks 10] [--minutes 2]
        [--before DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from _cluster import start_replicas, stop_replicas
from _common import ROOT, header, table, write_json
from fleet import Cluster, cluster_cpu, cpu_seconds
from sqlalchemy import create_engine, text

SETTINGS = {
    "max_connections": "600",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "5000",
}
KINDS = ("membership", "ticks", "other")


def replica(code: str, url: str, prefix: str, tasks: int) -> None:
    """One replica process (``idle_fleet.py --replica``)."""
    sys.path.insert(0, code)
    import logging

    from cronlease import Scheduler

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url, history_retention=None, max_workers=tasks)
    for index in range(tasks):
        scheduler.add_task(lambda: None, every="60s", name=f"{prefix}-{index:03d}")
    scheduler.start()
    print("started", flush=True)
    try:
        signal.sigwait({signal.SIGTERM})
    finally:
        scheduler.shutdown()


def kind_of(query: str) -> str:
    if "cronlease_members" in query:
        return "membership"
    if "cronlease_leases" in query or "cronlease_runs" in query:
        return "ticks"
    return "other"


def statements(engine: Any) -> dict[str, int]:
    found = dict.fromkeys(KINDS, 0)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d"
                " ON d.oid = s.dbid WHERE d.datname = 'postgres'"
                " AND query NOT LIKE '%pg_stat_statements%'"
            )
        ).all()
    for query, calls in rows:
        found[kind_of(str(query))] += int(calls)
    return found


def run_tree(
    cluster: Cluster, code: str, replicas: int, tasks: int, minutes: int
) -> dict[str, Any]:
    url = cluster.url
    admin = create_engine(url, isolation_level="AUTOCOMMIT", pool_size=1)
    with admin.connect() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
    prefix = f"idle-{int(time.time())}"
    procs = start_replicas(__file__, Path(code), [[url, prefix, str(tasks)]] * replicas)
    try:
        # from 5 s past the first minute that leaves 20 s of warm-up
        start = (int(time.time() + 20) // 60 + 1) * 60 + 5
        time.sleep(max(0.0, start - time.time()))
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_stat_statements_reset()"))
        cpu_before = cluster_cpu(cluster.postmaster)
        replica_before = [cpu_seconds(proc.pid) for proc in procs]
        end = start + 60 * minutes
        time.sleep(max(0.0, end - time.time()))
        cpu_after = cluster_cpu(cluster.postmaster)
        replica_after = [cpu_seconds(proc.pid) for proc in procs]
        counted = statements(admin)
    finally:
        stop_replicas(procs)
    with admin.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT name, slot, count(*) FROM cronlease_runs WHERE name LIKE :p"
                " AND slot >= :a AND slot < :b GROUP BY name, slot"
            ),
            {"p": f"{prefix}-%", "a": start * 1000, "b": end * 1000},
        ).all()
    admin.dispose()
    runs = sum(int(n) for _, _, n in rows)
    duplicates = sum(int(n) - 1 for _, _, n in rows if int(n) > 1)
    per = replicas * minutes
    figures: dict[str, Any] = {f"{kind}_per_replica_minute": counted[kind] / per for kind in KINDS}
    figures["between_ticks_per_replica_minute"] = (counted["membership"] + counted["other"]) / per
    figures["all_per_replica_minute"] = sum(counted.values()) / per
    figures["pg_cpu_ms_per_minute"] = (cpu_after - cpu_before) * 1000 / minutes
    figures["pg_cpu_s_per_hour"] = (cpu_after - cpu_before) * 60 / minutes
    figures["replica_cpu_ms_per_minute"] = (
        sum(a - b for a, b in zip(replica_after, replica_before, strict=True)) * 1000 / per
    )
    figures["runs"] = runs
    figures["duplicates"] = duplicates
    figures["misses"] = tasks * minutes - len(rows)
    return figures


ROWS = [
    ("membership statements / replica / minute", "membership_per_replica_minute"),
    ("other non-tick statements / replica / minute", "other_per_replica_minute"),
    ("= between ticks / replica / minute", "between_ticks_per_replica_minute"),
    ("tick statements / replica / minute", "ticks_per_replica_minute"),
    ("all statements / replica / minute", "all_per_replica_minute"),
    ("PostgreSQL CPU ms / minute", "pg_cpu_ms_per_minute"),
    ("PostgreSQL CPU s / hour", "pg_cpu_s_per_hour"),
    ("replica CPU ms / replica / minute", "replica_cpu_ms_per_minute"),
    ("runs in the window", "runs"),
    ("duplicates", "duplicates"),
    ("misses", "misses"),
]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--before", help="another checkout, measured first the same way")
    parser.add_argument("--json")
    args = parser.parse_args()
    header(
        f"idle fleet: {args.replicas} replicas x {args.tasks} tasks every minute, "
        f"{args.minutes} whole minutes, on a PostgreSQL cluster of its own"
    )
    trees = {"after": str(ROOT)}
    if args.before:
        trees = {"before": str(Path(args.before).resolve()), **trees}
    cluster = Cluster(SETTINGS)
    results: dict[str, dict[str, Any]] = {}
    try:
        for label, code in trees.items():
            print(f"{label}: cronlease from {code}", flush=True)
            results[label] = run_tree(cluster, code, args.replicas, args.tasks, args.minutes)
    finally:
        cluster.close()
    labels = list(results)
    headers = ["figure", *labels]
    if len(labels) == 2:
        headers.append("after / before")
    rows = []
    for label, key in ROWS:
        values = [results[name][key] for name in labels]
        if len(labels) == 2:
            before, after = values
            values.append(f"{after / before:.3f}x" if before else "-")
        rows.append([label, *values])
    table(headers, rows)
    figures = {
        f"r{args.replicas}.{name}.{key}": value
        for name in labels
        for key, value in results[name].items()
    }
    write_json(args.json, "idle_fleet", figures)


if __name__ == "__main__":
    main()
