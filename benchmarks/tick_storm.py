"""The tick storm: T tasks due at one instant on R replicas, each tick run exactly once.

(Not ``storm.py``, which is the *connection* storm.) Every replica is a real process
(``Scheduler``, default settings but ``history_retention=None`` and the tasks' grace)
on a throw-away PostgreSQL cluster of its own with ``pg_stat_statements``. All T tasks
share one instant: ``every="1h"`` anchored at a moment a little after every replica
has started (``--lead`` seconds after the replicas are launched), so they all fall due
together. A task's body appends (task, slot, start time) to its replica's ledger, a
file of its own (written every 0.5 s by a thread: no database connection). Printed:

- **time to the first and the last start** (run start minus the instant), start
  lateness p50 / p99, and how many ticks started within the first second of the storm;
- **duplicates and misses**, counted at the ledgers (a slot with two rows; a task with
  none), and the ticks that started more than the grace after the instant;
- **PostgreSQL**: CPU of every process of the cluster over the storm window, and
  statements (``pg_stat_statements``, reset just before the instant) by kind, the
  most frequent ones with their rows and mean time; the replicas' CPU over the window;
- **each replica**: its time from launch until its tasks are declared and until
  started, RSS when started and peak RSS;
- **WARNING lines** the replicas logged from the instant on: total, and the most in
  one second; with ``--grace`` too short (e.g. 2) ticks are skipped and said in
  aggregated lines.

``--mode rows`` keeps the T tasks as schedule rows (``cronlease_schedules``, inserted
in bulk as ``benchmarks/schedules.py`` does) that run a job every replica offers,
instead of tasks declared in code. ``--start-only``: no storm, each replica declares
T tasks (or follows T rows), starts, and reports its start time and RSS (e.g. 1,000,000).

    python benchmarks/tick_storm.py [--tasks 100000] [--replicas 8] [--grace 60]
        [--mode code|rows] [--lead S] [--start-only] [--before DIR | --code DIR]
        [--json FILE]

``--keep`` keeps the ledgers and the replicas' logs (a directory under the system's
temporary one, printed). ``--before DIR`` measures another checkout first (its
replicas import cronlease from DIR), the same way, in the same sitting; ``--code
DIR`` measures only that one. A
storm of 100,000 on 8 replicas takes minutes (the replicas' start, ``--lead``, then
the storm): on a shared machine, run one at a time. The default ``--lead`` allows for
a slow start; the run stops, saying so, if a replica started too close to the instant.

``STORM_SAMPLE=PATH`` (development): each replica samples its threads' stacks every
5 ms from the instant for ``STORM_SAMPLE_FOR`` seconds (60) into ``PATH.<pid>`` — a
sampling profile of where the storm's wall time goes (biased towards code that
releases the GIL).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _common import ROOT, header, percentile, table, write_json
from fleet import Cluster, cluster_cpu, cpu_seconds
from sqlalchemy import create_engine, text

SETTINGS = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "5000",
    "max_wal_size": "4GB",
}
JOB = "storm_note"
_LINE = re.compile(r"^(\d+\.\d+) (\w+) ")


# --- the replica process -------------------------------------------------------------


def replica(argv: list[str]) -> None:
    """``tick_storm.py --replica CODE URL PREFIX TASKS GRACE MODE INSTANT LEDGER START_ONLY``."""
    code, url, prefix, tasks_text, grace_text, mode, instant_text, ledger, start_only = argv
    sys.path.insert(0, code)
    import logging

    from cronlease import RunContext, Scheduler

    launched = float(os.environ.get("STORM_LAUNCHED", time.time()))
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(created).3f %(levelname)s %(message)s",
    )
    tasks, grace = int(tasks_text), float(grace_text)
    if os.environ.get("STORM_SAMPLE"):  # a poor man's sampling profiler, for development
        _sample(os.environ["STORM_SAMPLE"] + f".{os.getpid()}", float(instant_text))
    anchor = datetime.fromtimestamp(float(instant_text), timezone.utc)
    notes: list[str] = []
    lock = threading.Lock()

    def note(ctx: RunContext) -> None:
        started = time.time()
        with lock:
            notes.append(f"{ctx.name} {ctx.slot} {started:.4f}\n")

    stop = threading.Event()

    def flush() -> None:
        with lock:
            batch, notes[:] = list(notes), []
        if batch:
            with open(ledger, "a") as out:
                out.writelines(batch)

    def flusher() -> None:
        while not stop.wait(0.5):
            flush()

    if mode == "rows":
        scheduler = Scheduler(url, namespace=prefix, history_retention=None)
        scheduler.register(note, name=JOB)
    else:
        scheduler = Scheduler(url, history_retention=None)
        for index in range(tasks):
            scheduler.add_task(
                note, name=f"{prefix}-{index:07d}", every="1h", anchor=anchor, grace=grace
            )
    declared = time.time()
    # before any thread starts: SIGTERM waits for sigwait below
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=flusher, daemon=True).start()
    scheduler.start()
    if mode == "rows":  # until the rows are followed: every one is a task
        while len(scheduler._dynamic) < tasks:
            time.sleep(0.01)
    print(
        "started "
        + json.dumps(
            {
                "declare_s": declared - launched,
                "start_s": time.time() - launched,
                "rss_mb": _rss("VmRSS"),
            }
        ),
        flush=True,
    )
    if start_only == "1":
        scheduler.shutdown()
        return
    signal.sigwait({signal.SIGTERM})
    stop.set()
    flush()
    hwm = _rss("VmHWM")
    scheduler.shutdown()
    flush()
    print("report " + json.dumps({"peak_rss_mb": hwm}), flush=True)


def _sample(path: str, instant: float) -> None:
    """Every 5 ms from the instant for 60 s: each thread's innermost cronlease frames."""
    import traceback

    counts: Counter[str] = Counter()

    def run() -> None:
        time.sleep(max(0.0, instant - time.time()))
        me = threading.get_ident()
        end = time.time() + float(os.environ.get("STORM_SAMPLE_FOR", "60"))
        while time.time() < end:
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                stack = traceback.extract_stack(frame)
                shown = [f"{Path(f.filename).name}:{f.name}" for f in stack[-14:]]
                counts[" < ".join(reversed(shown))] += 1
            time.sleep(0.005)
            if int(time.time() * 10) % 5 == 0:
                Path(path).write_text(
                    "".join(f"{n} {stack}\n" for stack, n in counts.most_common(60))
                )

    threading.Thread(target=run, daemon=True).start()


def _rss(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- the parent ----------------------------------------------------------------------


def fill_rows(url: str, namespace: str, tasks: int, instant: float, grace: float) -> None:
    """T schedule rows running ``JOB``, all at ``instant``, inserted in bulk."""
    from cronlease._lease.schema import schedule_changes, schedules
    from cronlease._lease.store import LeaseStore
    from cronlease._schedules.rows import encode, normalized

    store = LeaseStore.from_url(url)
    store.create_tables()
    anchor = datetime.fromtimestamp(instant, timezone.utc)
    values = encode(normalized(job=JOB, every="1h", options={"anchor": anchor, "grace": grace}))
    now = time.time()
    with store.engine.begin() as conn:
        for start in range(0, tasks, 5000):
            conn.execute(
                schedules.insert(),
                [
                    {
                        "name": f"{namespace}:s{i:07d}",
                        "namespace": namespace,
                        "version": 1,
                        "changed_by": "bench",
                        "changed_at": now,
                        **values,
                    }
                    for i in range(start, min(tasks, start + 5000))
                ],
            )
        conn.execute(
            schedule_changes.insert().values(
                namespace=namespace,
                name=f"{namespace}:s0000000",
                version=1,
                action="add",
                changed_by="bench",
                changed_at=now,
                changes="{}",
            )
        )
    store.dispose()


def statements(engine: Any) -> Counter[str]:
    found: Counter[str] = Counter()
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT query, calls, rows, total_exec_time FROM pg_stat_statements s"
                " JOIN pg_database d"
                " ON d.oid = s.dbid WHERE d.datname = 'postgres'"
                " AND query NOT LIKE '%pg_stat_%'"
            )
        ).all()
    top = sorted(rows, key=lambda row: -row[1])[:8]
    for query, calls, returned, spent in top:
        shown = " ".join(str(query).split())[:90]
        print(f"    {calls:7d} calls {returned / calls:7.1f} rows {spent / calls:7.2f} ms  {shown}")
    for query, calls, _, _ in rows:
        query = str(query)
        if "cronlease_members" in query:
            kind = "membership"
        elif "cronlease_schedule" in query or "cronlease_jobs" in query:
            kind = "schedules"
        elif "cronlease_leases" in query or "cronlease_runs" in query:
            kind = "ticks"
        else:
            kind = "other"
        found[kind] += int(calls)
        found["all"] += int(calls)
    return found


def run_tree(cluster: Cluster, code: str, args: argparse.Namespace) -> dict[str, Any]:
    admin = create_engine(cluster.url, isolation_level="AUTOCOMMIT", pool_size=1)
    with admin.connect() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
    prefix = f"storm{int(time.time()) % 100000}"
    work = Path(tempfile.mkdtemp(prefix="tick-storm-"))
    instant = float(int(time.time() + args.lead))
    if args.mode == "rows":
        fill_rows(cluster.url, prefix, args.tasks, instant, args.grace)
        instant_check = instant
    else:
        instant_check = instant
    procs: list[subprocess.Popen[str]] = []
    errs: list[Any] = []
    ledgers = [work / f"ledger-{n}.txt" for n in range(args.replicas)]
    launched = time.time()
    for n in range(args.replicas):
        err = open(work / f"stderr-{n}.txt", "w+")  # noqa: SIM115 (closed below)
        errs.append(err)
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--replica",
                    code,
                    cluster.url,
                    prefix,
                    str(args.tasks),
                    str(args.grace),
                    args.mode,
                    str(instant),
                    str(ledgers[n]),
                    "1" if args.start_only else "0",
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONPATH": code, "STORM_LAUNCHED": str(launched)},
            )
        )
    result: dict[str, Any] = {}
    try:
        starts = []
        for n, proc in enumerate(procs):
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("started"):
                errs[n].seek(0)
                raise SystemExit(f"replica {n} did not start: {line!r} {errs[n].read()[-3000:]}")
            starts.append(json.loads(line.split(" ", 1)[1]))
        result["declare_s_max"] = max(s["declare_s"] for s in starts)
        result["start_s_max"] = max(s["start_s"] for s in starts)
        result["start_rss_mb_max"] = max(s["rss_mb"] for s in starts)
        if args.start_only:
            for proc in procs:
                proc.wait(timeout=600)
            return result
        all_started = time.time()
        result["started_before_instant_s"] = instant_check - all_started
        if all_started > instant_check - 1:
            raise SystemExit(
                f"the replicas started {all_started - instant_check:+.1f} s from the instant:"
                " give a longer --lead"
            )
        time.sleep(max(0.0, instant - 2 - time.time()))
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_stat_statements_reset()"))
        cpu_before = cluster_cpu(cluster.postmaster)
        replica_before = sum(cpu_seconds(proc.pid) for proc in procs)
        # until every tick ran, or the ledgers stopped growing past the grace
        deadline = instant + args.grace + args.settle + 30
        seen, quiet_since = -1, time.time()
        while time.time() < deadline:
            time.sleep(1.0)
            count = sum(_lines(ledger) for ledger in ledgers)
            if count >= args.tasks and time.time() > instant + 1:
                break
            if count != seen:
                seen, quiet_since = count, time.time()
            elif time.time() > instant + args.grace + 1 and time.time() - quiet_since > args.settle:
                break
        window_end = time.time()
        cpu_after = cluster_cpu(cluster.postmaster)
        replica_cpu = sum(cpu_seconds(proc.pid) for proc in procs) - replica_before
        counted = statements(admin)
    finally:
        reports = []
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            out, _ = proc.communicate(timeout=300)
            for line in out.splitlines():
                if line.startswith("report "):
                    reports.append(json.loads(line.split(" ", 1)[1]))
        stderrs = []
        for err in errs:
            err.seek(0)
            stderrs.append(err.read())
            err.close()
        admin.dispose()
        if args.start_only and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    # the ledgers
    runs: Counter[tuple[str, int]] = Counter()
    started_at: list[float] = []
    per_replica = []
    for ledger in ledgers:
        mine = 0
        if ledger.exists():
            for line in ledger.read_text().splitlines():
                name, slot, at = line.split()
                runs[(name, int(slot))] += 1
                started_at.append(float(at))
                mine += 1
        per_replica.append(mine)
    lateness = [at - instant for at in started_at]
    tasks_run = {name for name, _ in runs}
    result.update(
        {
            "runs": len(started_at),
            "duplicates": sum(n - 1 for n in runs.values() if n > 1),
            "misses": args.tasks - len(tasks_run),
            "started_past_grace": sum(late > args.grace for late in lateness),
            "first_start_s": min(lateness) if lateness else float("nan"),
            "last_start_s": max(lateness) if lateness else float("nan"),
            "late_p50_s": percentile(lateness, 0.5),
            "late_p99_s": percentile(lateness, 0.99),
            "first_second": sum(late < 1.0 for late in lateness),
            "runs_per_replica_min": min(per_replica),
            "runs_per_replica_max": max(per_replica),
            "pg_cpu_s": cpu_after - cpu_before,
            "replica_cpu_s": replica_cpu,
            "window_s": window_end - instant,
            "statements": counted["all"],
            "statements_ticks": counted["ticks"],
            "statements_membership": counted["membership"],
            "statements_schedules": counted["schedules"],
            "peak_rss_mb_max": max((r["peak_rss_mb"] for r in reports), default=float("nan")),
            "peak_rss_mb_min": min((r["peak_rss_mb"] for r in reports), default=float("nan")),
        }
    )
    # the WARNING lines from the instant on, per second
    per_second: Counter[int] = Counter()
    examples: list[str] = []
    tracebacks = 0
    for err in stderrs:
        tracebacks += err.count("Traceback")
        for line in err.splitlines():
            found = _LINE.match(line)
            if not found or float(found[1]) < instant - 1:
                continue
            if found[2] in ("WARNING", "ERROR"):
                per_second[int(float(found[1]) - instant)] += 1
                if len(examples) < 6:
                    examples.append(line[:300])
    result["warning_lines"] = sum(per_second.values())
    result["warning_lines_max_per_second"] = max(per_second.values(), default=0)
    result["tracebacks"] = tracebacks
    result["examples"] = examples
    if args.keep:
        result["work"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


ROWS = [
    ("replica: launch until declared, s (max)", "declare_s_max"),
    ("replica: launch until started, s (max)", "start_s_max"),
    ("replica: RSS when started, MB (max)", "start_rss_mb_max"),
    ("runs", "runs"),
    ("duplicates", "duplicates"),
    ("misses (tasks never run)", "misses"),
    ("started past the grace", "started_past_grace"),
    ("time to the first start, s", "first_start_s"),
    ("time to the last start, s", "last_start_s"),
    ("start lateness p50, s", "late_p50_s"),
    ("start lateness p99, s", "late_p99_s"),
    ("started in the first second", "first_second"),
    ("runs per replica, min", "runs_per_replica_min"),
    ("runs per replica, max", "runs_per_replica_max"),
    ("PostgreSQL CPU over the window, s", "pg_cpu_s"),
    ("replicas' CPU over the window (all), s", "replica_cpu_s"),
    ("window (instant to end), s", "window_s"),
    ("statements, all", "statements"),
    ("statements, leases/runs", "statements_ticks"),
    ("statements, membership", "statements_membership"),
    ("statements, schedule rows", "statements_schedules"),
    ("peak RSS per replica, MB (min)", "peak_rss_mb_min"),
    ("peak RSS per replica, MB (max)", "peak_rss_mb_max"),
    ("WARNING/ERROR lines from the instant", "warning_lines"),
    ("WARNING/ERROR lines, most in one second", "warning_lines_max_per_second"),
    ("tracebacks", "tracebacks"),
]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--grace", type=float, default=60.0)
    parser.add_argument("--mode", choices=("code", "rows"), default="code")
    parser.add_argument(
        "--lead", type=float, help="seconds from launch to the instant (default: by size)"
    )
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds without a new run that end it"
    )
    parser.add_argument("--start-only", action="store_true")
    parser.add_argument(
        "--keep", action="store_true", help="keep the ledgers and the replicas' logs"
    )
    parser.add_argument("--before", help="another checkout, measured first the same way")
    parser.add_argument("--code", help="measure only this checkout (default: this one)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.lead is None:
        args.lead = 15 + args.tasks * args.replicas / 4000
    what = "start only" if args.start_only else f"grace {args.grace:g} s"
    header(
        f"tick storm: {args.tasks} tasks ({args.mode}) due at one instant on "
        f"{args.replicas} replicas, {what}, on a PostgreSQL cluster of its own"
    )
    trees = {"after": str(ROOT)}
    if args.code:
        trees = {Path(args.code).name: str(Path(args.code).resolve())}
    elif args.before:
        trees = {"before": str(Path(args.before).resolve()), **trees}
    cluster = Cluster(SETTINGS)
    results: dict[str, dict[str, Any]] = {}
    try:
        for label, code in trees.items():
            print(f"{label}: cronlease from {code}", flush=True)
            results[label] = run_tree(cluster, code, args)
            for example in results[label].get("examples", []):
                print(f"  {label} log: {example}")
            if args.keep:
                print(f"  {label} files: {results[label].get('work')}", flush=True)
    finally:
        cluster.close()
    labels = list(results)
    rows = []
    for title, key in ROWS:
        if all(key not in results[name] for name in labels):
            continue
        rows.append([title, *(results[name].get(key, float("nan")) for name in labels)])
    table(["figure", *labels], rows)
    figures = {
        f"{args.mode}.t{args.tasks}.r{args.replicas}.{name}.{key}": value
        for name in labels
        for key, value in results[name].items()
        if isinstance(value, (int, float))
    }
    write_json(args.json, "tick_storm", figures)


if __name__ == "__main__":
    main()
