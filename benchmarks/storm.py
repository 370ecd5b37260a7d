"""The connection storm: more replicas than the server has connections for.

A throw-away PostgreSQL cluster started with ``--max-connections`` (default
50; 3 of them reserved for superusers) and ``--replicas`` replica processes
(default 60) of the code in ``--code`` (``--before DIR`` adds the previous
version, measured the same way first), started together (a cold start), each
with five tasks every 1, 2, 3, 5 and 10 s whose runs append to a ledger file
of the replica's own (no connection of its own). Reported:

- phase A (``--duration`` s after every replica started): replicas never seen
  connected (``pg_stat_activity`` sampled every 0.25 s, by application name),
  replicas that never ran a task (with five tasks a fleet runs two ticks a
  second, so a connected replica may win none), FATAL lines in the server's log
  (a refused connection each), connections in use (mean and peak, and per
  connected replica);
- phase B: ``--leave`` replicas that were connected and ran stop; over the next
  ``--after`` s, how many of those left out in phase A connected and ran a task,
  and the FATAL lines;
- duplicates (a slot twice in the ledgers), misses (a slot of phase A, after
  ``--warmup`` s, in no ledger), WARNING/ERROR lines in the replicas' logs.

With ``--pgbouncer MODE`` the replicas connect through a PgBouncer in that
pooling mode (tests/support/pgbouncer.py) instead: the server's connections
are PgBouncer's, counted in total (per replica: the total over the replicas).
A fleet that fits (issue 14: 80 replicas directly on ``max_connections = 100``,
200 through PgBouncer) is measured with ``--leave 0``.

    python benchmarks/storm.py [--replicas 60] [--max-connections 50] [--duration 60]
                               [--leave 15] [--after 30] [--before /path/to/previous/tree]
    python benchmarks/storm.py --replicas 80 --max-connections 100 --leave 0 --after 0
    python benchmarks/storm.py --replicas 200 --max-connections 100 --leave 0 --after 0 \
                               --pgbouncer transaction
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

TASKS = [("every-1s", "1s"), ("every-2s", "2s"), ("every-3s", "3s"), ("every-5s", "5s")]
TASKS.append(("every-10s", "10s"))


def replica(code: str, url: str, ledger: str) -> None:
    """One replica process (``storm.py --replica CODE URL LEDGER``)."""
    from _cluster import use_code

    use_code(code)
    import logging

    from cronlease import RunContext, Scheduler

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    lock = threading.Lock()
    scheduler = Scheduler(url, history_retention=None)
    for name, every in TASKS:

        def work(ctx: RunContext, name: str = name) -> None:
            with lock, open(ledger, "a") as file:
                file.write(f"{name} {ctx.slot} {time.time():.3f}\n")

        scheduler.add_task(work, every=every, name=name)

    def announce() -> None:
        while not scheduler.running:
            time.sleep(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


def ran(ledger: Path, since: float = 0.0) -> bool:
    if not ledger.exists():
        return False
    return any(float(line.split()[2]) >= since for line in ledger.read_text().splitlines())


def measure(code: Path, args: argparse.Namespace) -> dict[str, float]:
    from _cluster import Cluster, Sampler, start_replicas, stop_replicas

    cluster = Cluster(
        {"max_connections": str(args.max_connections), "superuser_reserved_connections": "3"}
    )
    folder = Path(tempfile.mkdtemp(prefix="cronlease-storm-"))
    prefix = "storm-"
    bouncer = None
    try:
        names = [f"{prefix}{i}" for i in range(args.replicas)]
        urls = [cluster.url(name) for name in names]
        if args.pgbouncer:
            from tests.support import pgbouncer

            bouncer = pgbouncer.start(args.pgbouncer, "postgres", urls[0].split("?")[0])
            urls = [bouncer.url("postgres", application_name=name) for name in names]
        sampler = Sampler(cluster, prefix, interval=0.25)
        ledgers = [folder / f"r{i}" for i in range(args.replicas)]
        procs = start_replicas(
            __file__,
            code,
            [[urls[i], str(ledgers[i])] for i in range(args.replicas)],
        )
        up = time.time()
        fatal_start = cluster.fatal_lines()
        time.sleep(args.duration)
        fatal_a = cluster.fatal_lines() - fatal_start
        window_a = sampler.between(up, time.time())
        a_end = time.time()
        connected_a = {name for counts in sampler.between(up, a_end) for name in counts}
        left_out = [i for i in range(args.replicas) if f"{prefix}{i}" not in connected_a]
        never_ran = [i for i in range(args.replicas) if not ran(ledgers[i])]
        working = [i for i in range(args.replicas) if i not in left_out and i not in never_ran]
        leaving = working[: args.leave]
        stop_replicas([procs[i] for i in leaving])
        b_start = time.time()
        time.sleep(args.after)
        fatal_b = cluster.fatal_lines() - fatal_start - fatal_a
        connected_b = {name for counts in sampler.between(b_start, time.time()) for name in counts}
        joined = sum(f"{prefix}{i}" in connected_b for i in left_out)
        joined_ran = sum(ran(ledgers[i], b_start) for i in left_out)
        errors = stop_replicas([proc for i, proc in enumerate(procs) if i not in leaving])
        sampler.stop()
    finally:
        if bouncer is not None:
            bouncer.stop()
        cluster.close()
    totals = [sum(counts.values()) for counts in window_a]
    rows = [
        line.split() for path in ledgers if path.exists() for line in path.read_text().splitlines()
    ]
    pairs = [(name, slot) for name, slot, _ in rows]
    seen = set(pairs)
    first, last = int(up + args.warmup) + 1, int(a_end) - 2
    expected = [
        (name, str(second * 1000))
        for name, every in TASKS
        for second in range(first, last)
        if second % int(every[:-1]) == 0
    ]
    shutil.rmtree(folder, ignore_errors=True)
    per_connected = [counts[name] for counts in window_a for name in counts if counts[name]]
    figures = {
        "never_connected_in_a": len(left_out),
        "never_ran_in_a": len(never_ran),
        "connections_per_connected_replica_a": round(statistics.fmean(per_connected), 2)
        if per_connected
        else 0,
        "fatal_in_a": fatal_a,
        "fatal_per_minute_a": round(fatal_a * 60 / args.duration, 1),
        "connections_mean_a": round(statistics.fmean(totals), 1) if totals else 0,
        "connections_peak_a": max(totals, default=0),
        "connections_mean_per_replica_a": round(statistics.fmean(totals) / args.replicas, 2)
        if totals
        else 0,
        "left_out_that_connected_in_b": joined,
        "left_out_that_ran_in_b": joined_ran,
        "fatal_in_b": fatal_b,
        "slots_in_a": len(expected),
        "misses_in_a": sum(slot not in seen for slot in expected),
        "duplicates": len(pairs) - len(set(pairs)),
        "warnings": sum(err.count("WARNING") + err.count("ERROR") for err in errors),
    }
    kinds = Counter(
        line.split(":", 2)[-1][:160]
        for err in errors
        for line in err.splitlines()
        if line.startswith(("WARNING", "ERROR"))
    )
    for text, count in kinds.most_common(5):
        print(f"  {count} x {text}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replica", nargs=3)
    parser.add_argument("--replicas", type=int, default=60)
    parser.add_argument("--max-connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--leave", type=int, default=15)
    parser.add_argument("--after", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--pgbouncer", choices=["transaction", "session"])
    parser.add_argument("--before", type=Path)
    parser.add_argument("--code", type=Path)
    args = parser.parse_args()
    if args.replica:
        replica(*args.replica)
        return
    from _common import ROOT, header, table

    header(
        f"connection storm: {args.replicas} replicas, max_connections={args.max_connections} "
        f"(3 reserved); phase A {args.duration:.0f} s; then {args.leave} stop, phase B "
        f"{args.after:.0f} s"
    )
    codes = [("after", args.code or ROOT)]
    if args.before:
        codes.insert(0, ("before", args.before))
    results = [(label, measure(code, args)) for label, code in codes]
    keys = list(results[0][1])
    table(
        ["figure", *(label for label, _ in results)],
        [[k, *(r[k] for _, r in results)] for k in keys],
    )


if __name__ == "__main__":
    main()
