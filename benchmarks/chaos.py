"""Chaos harness: replicas killed, PostgreSQL restarted, clocks skewed — count what ran.

    python benchmarks/chaos.py                       # defaults: about two minutes on 2 cores
    python benchmarks/chaos.py --replicas 5 --tasks 10 --duration 120 --kill-every 5 \\
        --pg-restarts 2 --skewed 2 --skew 0.4

R replica processes (`cronlease run` on a generated config) share one PostgreSQL
database. T tasks fire every second; each run appends (task, slot, pid) to a
ledger table. Every few seconds a random replica is SIGKILLed and restarted;
PostgreSQL is restarted a given number of times; some replicas run with their
wall clock shifted by libfaketime. At the end it prints: slots expected,
executed, duplicated, missed (and missed per kill per task), the longest
takeover after a kill, replica crashes and runs left `running`.

It restarts the local PostgreSQL cluster (pg_ctlcluster): run it on a
development machine, not against a shared server.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parents[1]
LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS cronlease_chaos_ledger "
    "(run_id TEXT, task TEXT, slot BIGINT, pid INT, at DOUBLE PRECISION)"
)
JOBS = """
import os, time
import psycopg

_conn = None

def append(ctx, url, run_id):
    global _conn
    try:
        if _conn is None or _conn.closed:
            _conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
        _conn.execute(
            "INSERT INTO cronlease_chaos_ledger VALUES (%s, %s, %s, %s, %s)",
            (run_id, ctx.name, ctx.slot, os.getpid(), time.time()),
        )
    except Exception:
        _conn = None
        raise
"""


@dataclass
class Replica:
    index: int
    skew: float | None
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)
    crashes: int = 0


def libfaketime() -> str | None:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


def start(replica: Replica, config: Path) -> None:
    env = dict(os.environ)
    if replica.skew is not None:
        lib = libfaketime()
        if lib is None:
            sys.exit("libfaketime is missing: apt-get install faketime (or --skewed 0)")
        env.update(LD_PRELOAD=lib, FAKETIME=f"{replica.skew:+}s", DONT_FAKE_MONOTONIC="1")
    with replica.log.open("ab") as log:
        replica.proc = subprocess.Popen(
            [sys.executable, "-m", "cronlease", "run", "-c", str(config)],
            cwd=config.parent,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    replica.pids.append(replica.proc.pid)


def restart_postgres() -> None:
    version = os.path.basename(sorted(glob.glob("/etc/postgresql/*"))[-1])
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"],
        check=True,
        timeout=120,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--pg-restarts", type=int, default=2)
    parser.add_argument("--skewed", type=int, default=2, help="replicas with a shifted clock")
    parser.add_argument("--skew", type=float, default=0.4, help="seconds, ± alternately")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--database",
        default=os.environ.get(
            "CRONLEASE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test"
        ),
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    run_id = uuid.uuid4().hex[:8]
    namespace = f"chaos-{run_id}"
    url = args.database
    psycopg_url = url.replace("postgresql+psycopg://", "postgresql://")
    # NullPool: the harness restarts PostgreSQL, so it must not keep connections
    engine = create_engine(
        url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=NullPool
    )
    with engine.begin() as conn:
        conn.execute(text(LEDGER_DDL))

    workdir = Path(tempfile.mkdtemp(prefix="cronlease-chaos-"))
    (workdir / "chaos_jobs.py").write_text(JOBS)
    tasks = [f"t{i:02d}" for i in range(args.tasks)]
    config = workdir / "cronlease.toml"
    config.write_text(
        f'database = "{url}"\nnamespace = "{namespace}"\n\n'
        + "".join(
            f'[tasks.{name}]\ncall = "chaos_jobs:append"\nevery = "1s"\n'
            f'args = ["{psycopg_url}", "{run_id}"]\n\n'
            for name in tasks
        )
    )
    replicas = [
        Replica(
            index=i,
            skew=(args.skew if i % 2 == 0 else -args.skew) if i < args.skewed else None,
            log=workdir / f"replica-{i}.log",
        )
        for i in range(args.replicas)
    ]
    print(f"chaos {run_id}: {args.replicas} replicas x {args.tasks} tasks, logs in {workdir}")
    for replica in replicas:
        start(replica, config)

    warmup = 5.0
    begin = time.time() + warmup
    end = begin + args.duration
    restarts_at = [
        begin + args.duration * (k + 1) / (args.pg_restarts + 1) for k in range(args.pg_restarts)
    ]
    kills: list[tuple[float, int]] = []  # (time, pid)
    next_kill = begin + args.kill_every
    while time.time() < end:
        now = time.time()
        for replica in replicas:  # a replica that died on its own is a crash
            if replica.proc is not None and replica.proc.poll() is not None:
                replica.crashes += 1
                print(f"  replica {replica.index} exited by itself ({replica.proc.returncode})")
                start(replica, config)
        if restarts_at and now >= restarts_at[0]:
            restarts_at.pop(0)
            print(f"  {now - begin:6.1f}s restarting PostgreSQL")
            restart_postgres()
        elif now >= next_kill:
            victim = rng.choice(replicas)
            assert victim.proc is not None
            kills.append((time.time(), victim.proc.pid))
            victim.proc.kill()
            victim.proc.wait()
            start(victim, config)
            # jittered, so kills do not always land at the same phase of the second
            next_kill += args.kill_every * rng.uniform(0.6, 1.4)
        time.sleep(0.05)
    for replica in replicas:
        assert replica.proc is not None
        replica.proc.send_signal(signal.SIGTERM)
    exit_codes = [replica.proc.wait(timeout=60) for replica in replicas if replica.proc]
    crashes = sum(replica.crashes for replica in replicas) + sum(code != 0 for code in exit_codes)

    first_slot = int(begin) * 1000 + 1000
    last_slot = int(end) * 1000 - 2000
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT task, slot, pid FROM cronlease_chaos_ledger "
                "WHERE run_id = :r AND slot BETWEEN :a AND :b"
            ),
            {"r": run_id, "a": first_slot, "b": last_slot},
        ).all()
        runs = conn.execute(
            text(
                "SELECT name, slot, holder, outcome, started_at FROM cronlease_runs "
                "WHERE name LIKE :ns ORDER BY started_at"
            ),
            {"ns": f"{namespace}:%"},
        ).all()
    counts = Counter((task, slot) for task, slot, _ in rows)
    expected = {(t, s) for t in tasks for s in range(first_slot, last_slot + 1, 1000)}
    executed = set(counts) & expected
    duplicated = sum(1 for n in counts.values() if n > 1)
    missed = expected - executed

    # Takeover: from a kill to the next run of each task the victim was running.
    takeovers: list[float] = []
    per_kill_task_misses: Counter[tuple[int, str]] = Counter()
    for killed_at, pid in kills:
        for name, slot, holder, outcome, started_at in runs:
            # a run of the victim that was still in progress when it was killed
            interrupted = (
                f":{pid}:" in holder
                and outcome in ("abandoned", "lost", "running")
                and 0 <= killed_at - started_at < 5.0
            )
            if interrupted:
                task = name.split(":", 1)[1]
                later = [r for r in runs if r[0] == name and r[1] > slot]
                if later:
                    takeovers.append(later[0][4] - killed_at)
                # the interrupted tick itself counts: a kill may cost it, and no more
                next_slot = later[0][1] if later else last_slot + 1
                per_kill_task_misses[(pid, task)] += sum(
                    1 for t, s in missed if t == task and slot <= s < next_slot
                )
    left_running = sum(1 for r in runs if r[3] == "running")
    table = [
        ("slots expected", len(expected)),
        ("executed", len(executed)),
        ("duplicated", duplicated),
        ("missed", len(missed)),
        ("kills", len(kills)),
        ("PostgreSQL restarts", args.pg_restarts),
        ("max missed per kill per task", max(per_kill_task_misses.values(), default=0)),
        ("max takeover after a kill (s)", f"{max(takeovers, default=0.0):.2f}"),
        ("replica crashes", crashes),
        ("runs left running", left_running),
    ]
    print()
    print(f"command: python benchmarks/chaos.py {' '.join(sys.argv[1:])}".rstrip())
    print(
        f"machine: {os.cpu_count()} cores; replicas {args.replicas} ({args.skewed} skewed "
        f"±{args.skew}s), tasks {args.tasks} at 1 s, {args.duration:.0f} s"
    )
    print()
    print("| measure | value |")
    print("| --- | --- |")
    for label, value in table:
        print(f"| {label} | {value} |")
    if missed:
        by_second = Counter(s for _, s in missed)
        print("\nmissed slots by second (seconds since start: count):")
        print(
            ", ".join(f"{(s - first_slot) / 1000:.0f}: {n}" for s, n in sorted(by_second.items()))
        )


if __name__ == "__main__":
    main()
