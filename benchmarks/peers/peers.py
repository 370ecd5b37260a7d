"""cronlease and its peers under one workload: one task every second on three processes,
40 ticks counted, the process that ran the latest tick killed -9 at 15 s.

    python benchmarks/peers/peers.py run all
    python benchmarks/peers/peers.py run cronlease aps4 [--window 40] [--kill-at 15]

Systems: ``cronlike`` (APScheduler 3 in memory in each process, as cron on every
replica), ``aps3`` (APScheduler 3, one shared ``SQLAlchemyJobStore``), ``aps4``
(APScheduler 4, ``SQLAlchemyDataStore`` + ``PsycopgEventBroker``), ``cronlease``,
``procrastinate`` (a periodic task, three workers), ``celerybeat`` (two beats, one
worker), ``redbeat`` (two beats with RedBeat's defaults), ``redbeat10`` (lock timeout
10 s), ``redbeatfast`` (lock timeout 10 s, ``beat_max_loop_interval = 2``).

Every run inserts a row into ``ledger(system, slot, at, pid)`` in a database of its own,
``peers_bench``, created on the PostgreSQL of ``PEERS_POSTGRES_URL`` (default: the
local ``test`` database's server) and dropped afterwards. A system that passes the
tick's scheduled instant records it as the slot; otherwise runs are bucketed to the
nearest second once the median phase is removed. The Celery systems start their own
``redis-server`` on 127.0.0.1:6390.

APScheduler 3 and 4 cannot share a virtualenv: this script runs in the peers'
virtualenv (APScheduler 4, Celery, RedBeat, procrastinate; benchmarks/README.md), and
starts the ``cronlike``, ``aps3`` and ``cronlease`` workers with ``CRONLEASE_PYTHON``
(default: this Python), a Python where cronlease and its APScheduler 3 are installed;
those workers import cronlease from this checkout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADMIN = os.environ.get("PEERS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
DATABASE = "peers_bench"
DB = urlunsplit(urlsplit(ADMIN)._replace(path=f"/{DATABASE}"))
REDIS_PORT = 6390
PY = sys.executable
MAIN_PY = os.environ.get("CRONLEASE_PYTHON", sys.executable)
MAIN_SYSTEMS = ("cronlike", "aps3", "cronlease")
CELERY_SYSTEMS = ("celerybeat", "redbeat", "redbeat10", "redbeatfast")
SYSTEMS = (*MAIN_SYSTEMS, "aps4", "procrastinate", *CELERY_SYSTEMS)


def record(system: str, slot: float | None) -> None:
    at = time.time()
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("INSERT INTO ledger VALUES (%s, %s, %s, %s)", (system, slot, at, os.getpid()))


# ---------------------------------------------------------------- workers (one process each)


def worker_cronlike() -> None:
    from apscheduler.schedulers.blocking import BlockingScheduler

    s = BlockingScheduler()
    s.add_job(lambda: record("cronlike", None), "cron", second="*")
    s.start()


def aps3_job() -> None:
    record("aps3", None)


def worker_aps3() -> None:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.blocking import BlockingScheduler

    store = SQLAlchemyJobStore(url=DB.replace("postgresql", "postgresql+psycopg", 1))
    s = BlockingScheduler(jobstores={"default": store})
    s.add_job(aps3_job, "cron", second="*", id="tick", replace_existing=True)
    s.start()


def aps4_job() -> None:
    from apscheduler import current_job

    record("aps4", current_job.get().scheduled_fire_time.timestamp())


def worker_aps4() -> None:
    from apscheduler import ConflictPolicy, Scheduler
    from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
    from apscheduler.eventbrokers.psycopg import PsycopgEventBroker
    from apscheduler.triggers.cron import CronTrigger

    store = SQLAlchemyDataStore(DB.replace("postgresql", "postgresql+psycopg", 1))
    broker = PsycopgEventBroker(DB)
    with Scheduler(store, broker) as s:
        s.add_schedule(
            aps4_job, CronTrigger(second="*"), id="tick", conflict_policy=ConflictPolicy.replace
        )
        s.run_until_stopped()


def worker_cronlease() -> None:
    from cronlease import RunContext, Scheduler

    s = Scheduler(DB)

    @s.task(every="1s", name="tick")
    def tick(ctx: RunContext) -> None:
        record("cronlease", ctx.scheduled_for.timestamp())

    s.run_forever()


def worker_procrastinate() -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DB))

    @app.periodic(cron="* * * * * *")
    @app.task(name="tick", queueing_lock="tick")
    def tick(timestamp: int) -> None:
        record("procrastinate", float(timestamp))

    with app.open():
        app.run_worker(concurrency=1)


WORKERS: dict[str, Callable[[], None]] = {
    "cronlike": worker_cronlike,
    "aps3": worker_aps3,
    "aps4": worker_aps4,
    "cronlease": worker_cronlease,
    "procrastinate": worker_procrastinate,
}

# ---------------------------------------------------------------- orchestration


def setup_db() -> None:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE ledger (system text, slot double precision, at double precision, pid int)"
        )


def drop_db() -> None:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=HERE,  # celery -A peers_celery and procrastinate --app peers_proc import from here
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )


def rows(system: str) -> list[tuple[float | None, float, int]]:
    with psycopg.connect(DB) as conn:
        return conn.execute(
            "SELECT slot, at, pid FROM ledger WHERE system = %s ORDER BY at", (system,)
        ).fetchall()


def wait_until(pred: Callable[[], bool], deadline: float) -> bool:
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def redis_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", REDIS_PORT), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def check_main_python() -> None:
    """Fail before the run, not 60 s into it, when CRONLEASE_PYTHON cannot run the
    cronlease and APScheduler 3 workers."""
    probe = subprocess.run(
        [MAIN_PY, "-c", "import cronlease, psycopg, apscheduler.schedulers.blocking"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        raise SystemExit(
            f"{MAIN_PY} cannot run the cronlease and APScheduler 3 workers"
            " (set CRONLEASE_PYTHON to the Python of cronlease's virtualenv):\n"
            + probe.stderr.strip().splitlines()[-1]
        )


def run(system: str, window: float, kill_at: float, logs: Path) -> dict[str, Any]:
    setup_db()
    procs: list[subprocess.Popen[bytes]] = []
    redis = None
    beats: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        if system == "procrastinate":
            subprocess.run(
                [PY, "-m", "procrastinate", "--app", "peers_proc.app", "schema", "--apply"],
                cwd=HERE,
                check=True,
                env={**os.environ, "PEERS_DB": DB},
                capture_output=True,
            )
        if system in CELERY_SYSTEMS:
            server = ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1"]
            redis = start([*server, "--save", "", "--appendonly", "no"], logs / "redis.log")
            if not wait_until(redis_answers, time.time() + 30):
                raise SystemExit(f"redis-server: no answer on port {REDIS_PORT} within 30 s")
            env = {"PEERS_SYSTEM": system}
            worker = [PY, "-m", "celery", "-A", "peers_celery", "worker", "--pool", "solo"]
            worker += ["-c", "1", "--loglevel", "WARNING"]
            procs.append(start(worker, logs / f"{system}-worker.log", env))
            for i in range(2):
                log = logs / f"{system}-beat{i}.log"
                cmd = [PY, "-m", "celery", "-A", "peers_celery", "beat", "--loglevel", "INFO"]
                cmd += ["-s", str(logs / f"{system}-beat{i}-schedule"), "--pidfile", ""]
                if system.startswith("redbeat"):
                    cmd += ["-S", "redbeat.RedBeatScheduler"]
                p = start(cmd, log, env)
                procs.append(p)
                beats.append((p, log))
        else:
            py = MAIN_PY if system in MAIN_SYSTEMS else PY
            env = {"PYTHONPATH": str(ROOT)} if system in MAIN_SYSTEMS else {}
            for i in range(3):
                cmd = [py, __file__, "worker", system]
                procs.append(start(cmd, logs / f"{system}{i}.log", env))
        # warm-up: until the first run is recorded, then 3 s more for every process to join
        if not wait_until(lambda: len(rows(system)) > 0, time.time() + 60):
            raise SystemExit(f"{system}: no run within 60 s (logs in {logs})")
        time.sleep(3)
        w0 = math.ceil(time.time())
        time.sleep(max(0.0, w0 + kill_at - time.time()))
        # kill -9 the process that ran the latest tick; for Celery, the beat that has sent
        # the most (with RedBeat, the one holding the lock)
        if beats:

            def sends(item: tuple[subprocess.Popen[bytes], Path]) -> int:
                return item[1].read_text().count("Sending due task")

            victim = max(beats, key=sends)[0]
        else:
            pid = rows(system)[-1][2]
            victim = next((p for p in procs if p.pid == pid), procs[0])
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time()
        time.sleep(max(0.0, w0 + window - time.time()) + 2)
        data = rows(system)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if redis is not None:
            redis.terminate()
            redis.wait()
        drop_db()
    return analyse(system, data, w0, window, killed_at)


def analyse(
    system: str,
    data: list[tuple[float | None, float, int]],
    w0: int,
    window: float,
    killed_at: float,
) -> dict[str, Any]:
    have_slot = all(r[0] is not None for r in data)
    if have_slot:
        tagged = [(round(r[0] or 0.0), r[1]) for r in data]
    else:
        # bucket to the nearest second once the typical lateness (phase) is removed
        phase = statistics.median(r[1] - math.floor(r[1]) for r in data)
        tagged = [(round(r[1] - phase), r[1]) for r in data]
    slots = range(w0, w0 + int(window))
    count: dict[int, int] = {}
    for slot, _at in tagged:
        count[slot] = count.get(slot, 0) + 1
    before = [s for s in slots if s < killed_at - 1]
    after = [s for s in slots if s >= killed_at - 1]
    lateness = sorted(at - slot for slot, at in tagged if w0 <= slot < w0 + window)
    ran_after = sorted(at for slot, at in tagged if at > killed_at)
    return {
        "system": system,
        "slots": len(slots),
        "runs": sum(count.get(s, 0) for s in slots),
        "extra_runs": sum(max(0, count.get(s, 0) - 1) for s in slots),
        "slots_twice_or_more": sum(1 for s in slots if count.get(s, 0) > 1),
        "missed_before_kill": sum(1 for s in before if count.get(s, 0) == 0),
        "missed_after_kill": sum(1 for s in after if count.get(s, 0) == 0),
        "first_run_after_kill_s": round(ran_after[0] - killed_at, 2) if ran_after else None,
        "lateness_p50_ms": round(1000 * lateness[len(lateness) // 2], 1) if lateness else None,
        "slot_known": have_slot,
    }


COLUMNS = (
    ("system", "system"),
    ("runs", "runs"),
    ("slots_twice_or_more", "ticks run twice or more"),
    ("missed_before_kill", "missed before the kill"),
    ("missed_after_kill", "missed after it"),
    ("first_run_after_kill_s", "next run after the kill (s)"),
    ("lateness_p50_ms", "start lateness p50 (ms)"),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="one process of a system (started by run)")
    w.add_argument("system", choices=sorted(WORKERS))
    r = sub.add_parser("run", help="measure systems one after the other")
    r.add_argument(
        "systems",
        nargs="+",
        choices=("all", *SYSTEMS),
        metavar="SYSTEM",
        help=", ".join(("all", *SYSTEMS)),
    )
    r.add_argument("--window", type=float, default=40, help="ticks counted (seconds)")
    r.add_argument("--kill-at", type=float, default=15, help="seconds into the window")
    r.add_argument("--logs", type=Path, help="the processes' logs (default: a new temp dir)")
    r.add_argument("--json", type=Path, help="append each result to this file, one per line")
    args = parser.parse_args()
    if args.cmd == "worker":
        WORKERS[args.system]()
        return
    systems = list(SYSTEMS) if "all" in args.systems else args.systems
    if any(s in MAIN_SYSTEMS for s in systems):
        check_main_python()
    if any(s in CELERY_SYSTEMS for s in systems) and shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not on PATH (the Celery systems need it)")
    logs = args.logs or Path(tempfile.mkdtemp(prefix="cronlease-peers-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"$ {' '.join([Path(PY).name, *sys.argv])}  (logs in {logs})", flush=True)
    results = []
    for system in systems:
        result = run(system, args.window, args.kill_at, logs)
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps({**result, "date": time.strftime("%Y-%m-%d %H:%M")}) + "\n")
    print("\n| " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for result in results:
        print("| " + " | ".join(str(result[key]) for key, _ in COLUMNS) + " |")


if __name__ == "__main__":
    main()
