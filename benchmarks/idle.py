"""An idle replica: 100 tasks every 60 s for 2 minutes — CPU, memory, wake-ups, transactions.

One real replica process (``Scheduler.run_forever()``). Measured from
/proc after start-up: CPU seconds and share, RSS, voluntary context
switches per second (a busy-polling thread shows up here), threads, and
database transactions (PostgreSQL: pg_stat_database of a database of its own).

    python benchmarks/idle.py [--backend postgresql] [--tasks 100] [--every 60s]
                              [--duration 120] [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, header, median, pg_commits, table, url_for, write_json

CLK_TCK = os.sysconf("SC_CLK_TCK")


def replica(url: str, prefix: str, tasks: int, every: str) -> None:
    from cronlease import Scheduler

    scheduler = Scheduler(url, history_retention=None)
    for index in range(tasks):
        scheduler.add_task(lambda: None, every=every, name=f"{prefix}-{index:03d}")
    scheduler.start()
    print("started", flush=True)
    try:
        signal.sigwait({signal.SIGTERM})
    finally:
        scheduler.shutdown()


def proc_sample(pid: int) -> dict[str, float]:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = {}
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                switches += int(line.split()[1])
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return {
        "cpu": (int(stat[11]) + int(stat[12])) / CLK_TCK,
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "threads": int(status["Threads"]),
        "switches": switches,
    }


def run_once(backend: str, tasks: int, every: str, duration: float) -> dict[str, float]:
    url = url_for(backend)
    prefix = f"idle-{os.getpid()}-{int(time.time())}"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--replica", url, prefix, str(tasks), every],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        if not proc.stdout.readline().startswith("started"):
            raise SystemExit("the replica did not start")
        time.sleep(2.0)  # start-up (schema, clock check) is not idling
        commits = pg_commits(url) if backend == "postgresql" else 0
        first = proc_sample(proc.pid)
        time.sleep(duration)
        last = proc_sample(proc.pid)
        xacts = pg_commits(url) - commits - 1 if backend == "postgresql" else float("nan")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    cpu = last["cpu"] - first["cpu"]
    return {
        "cpu_s": cpu,
        "cpu_share": cpu / duration,
        "rss_mb": last["rss_mb"],
        "threads": last["threads"],
        "wakeups_per_s": (last["switches"] - first["switches"]) / duration,
        "transactions": xacts,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        replica(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="postgresql")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--every", default="60s")
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    header(f"idle: one replica, {args.tasks} tasks every {args.every}, {args.duration:.0f} s")
    results = [
        run_once(args.backend, args.tasks, args.every, args.duration) for _ in range(args.runs)
    ]
    med = {key: median(r[key] for r in results) for key in results[0]}
    table(
        ["backend", "CPU s", "CPU share", "RSS MB", "threads", "wake-ups/s", "DB transactions"],
        [
            [
                args.backend,
                med["cpu_s"],
                f"{med['cpu_share']:.3%}",
                med["rss_mb"],
                int(med["threads"]),
                med["wakeups_per_s"],
                med["transactions"],
            ]
        ],
    )
    print(
        f"medians of {args.runs} run(s); measured after start-up; "
        "wake-ups = voluntary context switches of all threads"
    )
    write_json(args.json, "idle", {f"{args.backend}.{k}": v for k, v in med.items()})


if __name__ == "__main__":
    main()
