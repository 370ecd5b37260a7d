"""Celery's beat schedule on a fleet: cronlease as the beat vs Celery beat + RedBeat.

One Celery app (beat_fleet_app.py) with E beat entries, each every second, one
``celery worker`` (prefork), one ``redis-server`` of the benchmark's own as the broker
(127.0.0.1:6391). For each system, one after the other, N beat-side processes:

- ``cronlease``: N ``cronlease run --celery-app beat_fleet_app:app`` replicas, leases on
  PostgreSQL (a schema of the run's own, dropped after): each tick of each entry sent
  by the replica that wins its lease;
- ``redbeat``: N ``celery beat -S redbeat.RedBeatScheduler`` with RedBeat's defaults
  (a lock in Redis; only its holder sends; lock timeout 25 minutes);
- ``redbeatfast``: the same with ``redbeat_lock_timeout = 10`` and
  ``beat_max_loop_interval = 2`` (a standby retries the lock every 2 s).

Every message is stamped by its publisher with its pid and the time of sending; the
worker's task records (entry, cronlease's scheduled slot if any, sender, sent at) in a
Redis list, the ledger, read once the worker has drained the queue. Per phase:

- **steady**: ``--seconds`` with every process up;
- **kills** (``--kills K``, 0 for none): every ``--kill-every`` s (jittered by up to
  1 s) the process that sent the latest message (cronlease: any replica sending;
  RedBeat: the lock holder) is killed -9 and started again at once; the phase lasts
  K + 1 periods. A kill is skipped when nothing was sent since the previous one
  (RedBeat whose holder died: nobody is sending).

Figures: messages sent per second (LPUSH calls on the broker; the worker's ledger
uses RPUSH), connections Redis accepted per second (the worker keeps its own), ticks
executed vs expected (E x seconds), duplicates, misses, the longest silence of an
entry, lost ticks per kill, CPU seconds of the beat side (sum over the beat processes,
/proc, restarted ones included), of PostgreSQL's backends serving the replicas
(cronlease) and of redis-server (the broker for both, RedBeat's state too).

cronlease's slots are exact (the ``cronlease_scheduled_for`` header): executed are the
slots with a message, a duplicate a slot sent twice. Celery beat passes no slot and
counts each interval from the previous send: executed are the sends, a duplicate two
sends of an entry less than 0.5 s apart. For both, missed = expected - executed (for
RedBeat, silences and the drift of its intervals alike); lost ticks per kill = the kill
phase's misses beyond the steady phase's rate, per kill done.

    python benchmarks/peers/beat_fleet.py [--systems cronlease,redbeat,redbeatfast]
        [--replicas 8] [--entries 200] [--seconds 60] [--kills 5] [--kill-every 10]
        [--worker-procs 2] [--log-level WARNING] [--max-workers N] [--json FILE] [--logs DIR]

``--max-workers N`` runs the cronlease replicas as ``Scheduler(max_workers=N)`` +
``add_beat_schedule`` in Python; by default they are ``cronlease run --celery-app``,
whose replica has ``max_workers = 16`` (the CLI has no setting for it).

Runs with cronlease's Python (cronlease, Celery, redis-py, psycopg); RedBeat's beats run
with ``REDBEAT_PYTHON`` (default: this Python), a Python with ``celery-redbeat``
(benchmarks/README.md). Needs ``redis-server`` on the PATH and the PostgreSQL of
``BEAT_FLEET_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
Everything it starts (processes, the Redis server, the schema, the temporary logs
unless ``--logs``) is removed on exit, Ctrl-C or failure included.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psycopg  # noqa: E402
import redis  # noqa: E402
from _common import ROOT, header, percentile, table, write_json  # noqa: E402

PY = sys.executable
REDBEAT_PY = os.environ.get("REDBEAT_PYTHON", sys.executable)
ADMIN = os.environ.get("BEAT_FLEET_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
PORT = 6391
SYSTEMS = ("cronlease", "redbeat", "redbeatfast")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY = 0.5
#: from the first executed tick until the window opens: membership settles, lock taken
WARMUP = 5.0
STOP_WAIT = 15.0


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class CpuMeter:
    """Samples the CPU of watched processes every 0.5 s in a thread, keeping each one's
    last value, so a process that dies (kill -9) keeps the CPU it had spent."""

    def __init__(self, backends: Callable[[], list[int]] | None = None) -> None:
        self._lock = threading.Lock()
        self._groups: dict[int, str] = {}
        self._last: dict[int, float] = {}
        self._backends = backends
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-meter", daemon=True)
        self._thread.start()

    def watch(self, pid: int, group: str) -> None:
        with self._lock:
            self._groups[pid] = group
        self.sample_one(pid)

    def sample_one(self, pid: int) -> None:
        value = cpu_seconds(pid)
        if value is not None:
            with self._lock:
                self._last[pid] = value

    def sample(self) -> dict[int, float]:
        if self._backends is not None:
            with contextlib.suppress(psycopg.Error):
                for pid in self._backends():
                    with self._lock:
                        self._groups.setdefault(pid, "db")
        with self._lock:
            pids = list(self._groups)
        for pid in pids:
            self.sample_one(pid)
        with self._lock:
            return dict(self._last)

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def spent(self, start: dict[int, float], end: dict[int, float]) -> dict[str, float]:
        """CPU per group between two samples; a process first seen after ``start``
        counts from zero (a restarted replica's start-up is in its phase)."""
        out: dict[str, float] = defaultdict(float)
        with self._lock:
            groups = dict(self._groups)
        for pid, value in end.items():
            out[groups.get(pid, "?")] += value - start.get(pid, 0.0)
        return dict(out)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass
class Run:
    """What one system's run started, for the cleanup."""

    logs: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


STARTED: list[subprocess.Popen[bytes]] = []


def start(
    cmd: list[str], log: Path, env: dict[str, str], cwd: Path = HERE
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **env},
            start_new_session=True,  # a Ctrl-C reaches only this script, which stops them
        )
    STARTED.append(proc)
    return proc


def stop(procs: list[subprocess.Popen[bytes]], wait: float = STOP_WAIT) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise SystemExit(f"{what}: not within {timeout:.0f} s")


def sleep_until(at: float) -> None:
    time.sleep(max(0.0, at - time.time()))


def redis_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def lpush_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_lpush", {}).get("calls", 0))


def connections_opened(client: redis.Redis) -> int:
    return int(client.info("stats").get("total_connections_received", 0))


def ledger_rows(client: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in client.lrange("ledger", 0, -1)]


def latest_sender(client: redis.Redis, since: float, alive: set[int]) -> int | None:
    """The pid of the live beat process that sent the latest message after ``since``
    (the worker's ledger lags by its queue: the tail is enough)."""
    best: tuple[float, int] | None = None
    for raw in client.lrange("ledger", -2000, -1):
        row = json.loads(raw)
        fresh = row["sender"] in alive and row["sent_at"] > since
        if fresh and (best is None or row["sent_at"] > best[0]):
            best = (row["sent_at"], row["sender"])
    return best[1] if best else None


# ---------------------------------------------------------------- one system


def replica(max_workers: int, log_level: str) -> None:
    """A cronlease replica declared in Python (``add_beat_schedule``), for a
    ``max_workers`` that ``cronlease run`` does not set (it keeps the default, 16)."""
    import logging

    from beat_fleet_app import app

    from cronlease import Scheduler
    from cronlease.contrib.celery import add_beat_schedule

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    scheduler = Scheduler(
        os.environ["CRONLEASE_DATABASE_URL"], max_workers=max_workers, shutdown_grace=5
    )
    add_beat_schedule(scheduler, app)
    scheduler.run_forever()


def beat_command(system: str, index: int, args: argparse.Namespace, logs: Path) -> list[str]:
    if system == "cronlease" and args.max_workers is not None:
        return [PY, __file__, "--replica", str(args.max_workers), "--log-level", args.log_level]
    if system == "cronlease":
        return [
            PY,
            "-m",
            "cronlease",
            "run",
            "--celery-app",
            "beat_fleet_app:app",
            "--grace",
            "5",
            "--log-level",
            args.log_level,
        ]
    return [
        REDBEAT_PY,
        "-m",
        "celery",
        "-A",
        "beat_fleet_app",
        "beat",
        "-S",
        "redbeat.RedBeatScheduler",
        "--loglevel",
        args.log_level,
        "-s",
        str(logs / f"{system}-beat{index}-schedule"),
        "--pidfile",
        "",
    ]


def run_system(
    system: str, args: argparse.Namespace, logs: Path, client: redis.Redis, rng: random.Random
) -> dict[str, Any]:
    client.flushall()
    client.config_resetstat()
    tag = f"beat_fleet_{os.getpid()}"
    env = {
        "BEAT_FLEET_SYSTEM": system,
        "BEAT_FLEET_ENTRIES": str(args.entries),
        "BEAT_FLEET_REDIS_PORT": str(PORT),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]),
    }
    backends: Callable[[], list[int]] | None = None
    admin: psycopg.Connection[Any] | None = None
    if system == "cronlease":
        admin = psycopg.connect(ADMIN, autocommit=True)
        admin.execute(f"DROP SCHEMA IF EXISTS {tag} CASCADE")
        admin.execute(f"CREATE SCHEMA {tag}")
        base = ADMIN.replace("postgresql://", "postgresql+psycopg://", 1)
        url = f"{base}?options=-csearch_path%3D{tag}&application_name={tag}"
        env["CRONLEASE_DATABASE_URL"] = url
        from cronlease.store import LeaseStore

        store = LeaseStore.from_url(url)  # tables made once, not raced by N replicas
        store.create_tables()
        store.dispose()
        conn = admin

        def backends() -> list[int]:
            return [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (tag,)
                ).fetchall()
            ]

    meter = CpuMeter(backends)
    worker: subprocess.Popen[bytes] | None = None
    beats: list[subprocess.Popen[bytes]] = []
    kills: list[dict[str, Any]] = []
    try:
        meter.watch(args.redis_pid, "redis")
        worker_cmd = [PY, "-m", "celery", "-A", "beat_fleet_app", "worker", "--pool", "prefork"]
        worker_cmd += ["-c", str(args.worker_procs), "--loglevel", "WARNING"]
        worker_cmd += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
        worker = start(worker_cmd, logs / f"{system}-worker.log", env)
        for i in range(args.replicas):
            proc = start(beat_command(system, i, args, logs), logs / f"{system}-beat{i}.log", env)
            beats.append(proc)
            meter.watch(proc.pid, "beat")
        wait_until(
            lambda: client.llen("ledger") >= args.entries,
            120,
            f"{system}: the first tick of every entry executed (logs in {logs})",
        )
        time.sleep(WARMUP)
        phases: dict[str, tuple[float, float]] = {}
        figures: dict[str, dict[str, Any]] = {}

        def measure(name: str, begin: float, end: float, action: Callable[[], None]) -> None:
            sleep_until(begin)
            cpu0, sent0, conns0 = meter.sample(), lpush_calls(client), connections_opened(client)
            action()
            sleep_until(end)
            cpu1, sent1, conns1 = meter.sample(), lpush_calls(client), connections_opened(client)
            phases[name] = (begin, end)
            figures[name] = {
                "cpu": meter.spent(cpu0, cpu1),
                "sent": sent1 - sent0,
                "connections": conns1 - conns0,
            }

        w0 = math.ceil(time.time())
        measure("steady", w0, w0 + args.seconds, lambda: None)

        def kill_loop(k0: float) -> None:
            last_kill = k0
            for i in range(1, args.kills + 1):
                sleep_until(k0 + i * args.kill_every + rng.uniform(0.0, 1.0))
                alive = {p.pid for p in beats if p.poll() is None}
                victim_pid = latest_sender(client, last_kill, alive)
                at = time.time()
                if victim_pid is None:
                    kills.append({"at": at, "victim": None})
                    continue
                index = next(n for n, p in enumerate(beats) if p.pid == victim_pid)
                meter.sample_one(victim_pid)
                os.kill(victim_pid, signal.SIGKILL)
                beats[index].wait()
                log = logs / f"{system}-beat{index}.log"
                beats[index] = start(beat_command(system, index, args, logs), log, env)
                meter.watch(beats[index].pid, "beat")
                kills.append({"at": at, "victim": victim_pid, "restarted": beats[index].pid})
                last_kill = at

        if args.kills:
            k0 = w0 + args.seconds
            span = (args.kills + 1) * args.kill_every
            measure("kills", k0, k0 + span, lambda: kill_loop(k0))
        stop(beats)
        # the worker drains what was sent: the queue and its prefetched (unacked) messages
        broker = redis.Redis(host="127.0.0.1", port=PORT, db=0)
        wait_until(
            lambda: broker.llen("celery") == 0 and broker.hlen("unacked") == 0,
            300,
            f"{system}: the worker drained the queue",
        )
        time.sleep(1.0)
        rows = ledger_rows(client)
    finally:
        meter.close()
        stop(beats)
        if worker is not None:
            stop([worker])
        if admin is not None:
            admin.execute(f"DROP SCHEMA IF EXISTS {tag} CASCADE")
            admin.close()
        client.flushall()
    results = {}
    for name, (begin, end) in phases.items():
        in_phase = [k for k in kills if begin <= k["at"] < end]
        results[name] = analyse(system, rows, begin, end, args.entries, figures[name], in_phase)
    steady = results["steady"]
    for phase in results.values():
        done = phase.pop("kills_done")
        # beyond what the steady phase missed in as many seconds (RedBeat's drift)
        baseline = steady["missed"] * phase["seconds"] / steady["seconds"]
        extra = max(0.0, phase["missed"] - baseline)
        phase["lost_per_kill"] = round(extra / len(done), 1) if done else None
    return results


# ---------------------------------------------------------------- analysis


def slot_of(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp())


def analyse(
    system: str,
    rows: list[dict[str, Any]],
    begin: float,
    end: float,
    entries: int,
    measured: dict[str, Any],
    kills: list[dict[str, Any]],
) -> dict[str, Any]:
    seconds = end - begin
    expected = int(entries * seconds)
    by_entry: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_entry[row["entry"]].append(row["sent_at"])
    longest = 0.0
    for sends in by_entry.values():
        inside = sorted(t for t in sends if begin <= t < end)
        before = [t for t in sends if t < begin]
        points = ([max(before)] if before else [begin]) + inside + [end]
        longest = max(longest, *(b - a for a, b in itertools.pairwise(points)))
    lateness: list[float] = []
    if system == "cronlease":
        count: dict[tuple[str, int], int] = defaultdict(int)
        for row in rows:
            slot = slot_of(row["slot"])
            if begin <= slot < end:
                count[(row["entry"], slot)] += 1
                lateness.append(row["sent_at"] - slot)
        executed = len(count)
        duplicates = sum(n - 1 for n in count.values())
        missed = expected - executed
    else:
        executed = duplicates = 0
        for sends in by_entry.values():
            last: float | None = None
            for t in sorted(sends):
                if last is not None and t - last < 0.5:
                    duplicates += begin <= t < end
                    continue
                executed += begin <= t < end
                last = t
        # the ticks of the phase with no message, whatever the cause: a silence, or the
        # interval counted from each send (each entry's sends drift later)
        missed = max(0, expected - executed)
    done = [k for k in kills if k["victim"] is not None]
    cpu = measured["cpu"]
    out: dict[str, Any] = {
        "seconds": seconds,
        "expected": expected,
        "executed": executed,
        "duplicates": duplicates,
        "missed": missed,
        "sent_per_s": round(measured["sent"] / seconds, 1),
        "redis_connections_per_s": round(measured["connections"] / seconds, 1),
        "longest_silence_s": round(longest, 2),
        "kills": len(done),
        "kills_skipped": len(kills) - len(done),
        "kills_done": done,
        "beat_cpu_s": round(cpu.get("beat", 0.0), 2),
        "beat_cpu_ms_per_tick": round(1000 * cpu.get("beat", 0.0) / seconds, 1),
        "db_cpu_s": round(cpu.get("db", 0.0), 2) if system == "cronlease" else None,
        "redis_cpu_s": round(cpu.get("redis", 0.0), 2),
    }
    if lateness:
        out["send_late_p50_ms"] = round(1000 * statistics.median(lateness), 1)
        out["send_late_p99_ms"] = round(1000 * percentile(lateness, 0.99), 1)
    return out


# ---------------------------------------------------------------- main


def probe(python: str, code: str, what: str) -> str:
    found = subprocess.run(
        [python, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        lines = found.stderr.strip().splitlines() or ["(no output)"]
        raise SystemExit(f"{python} cannot run {what}: {lines[-1]}")
    return found.stdout.strip()


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same cleanup as Ctrl-C


COLUMNS = (
    ("system", "system"),
    ("phase", "phase"),
    ("sent_per_s", "sent msg/s"),
    ("executed", "ticks executed"),
    ("expected", "expected"),
    ("missed", "missed"),
    ("duplicates", "duplicates"),
    ("longest_silence_s", "longest silence of an entry (s)"),
    ("kills", "kills"),
    ("lost_per_kill", "lost ticks per kill"),
    ("beat_cpu_s", "beat CPU s"),
    ("beat_cpu_ms_per_tick", "beat CPU ms/tick"),
    ("db_cpu_s", "PostgreSQL CPU s"),
    ("redis_cpu_s", "Redis CPU s"),
    ("redis_connections_per_s", "Redis connections opened/s"),
)


@contextlib.contextmanager
def redis_server(logs: Path) -> Iterator[subprocess.Popen[bytes]]:
    cmd = ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--save", ""]
    cmd += ["--appendonly", "no"]
    if redis_answers():
        raise SystemExit(f"something already answers on port {PORT}: not starting Redis there")
    server = start(cmd, logs / "redis.log", {})
    try:
        wait_until(redis_answers, 30, f"redis-server answering on port {PORT}")
        yield server
    finally:
        stop([server])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=", ".join(SYSTEMS))
    parser.add_argument("--replicas", type=int, default=8, help="beat processes per system")
    parser.add_argument("--entries", type=int, default=200, help="beat entries, each every 1 s")
    parser.add_argument("--seconds", type=int, default=60, help="the steady window")
    parser.add_argument("--kills", type=int, default=5, help="kills in the kill phase (0: none)")
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds between kills")
    parser.add_argument("--worker-procs", type=int, default=2, help="the worker's processes")
    parser.add_argument("--log-level", default="WARNING", help="the beat processes' log level")
    parser.add_argument(
        "--max-workers",
        type=int,
        help="cronlease replicas as Scheduler(max_workers=N) + add_beat_schedule in Python "
        "(default: `cronlease run --celery-app`, whose replica has the default 16)",
    )
    parser.add_argument("--replica", type=int, help=argparse.SUPPRESS)  # one replica's process
    parser.add_argument("--seed", type=int, default=1, help="the kill times' jitter")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    parser.add_argument("--json", help="write the figures to this file (benchmarks/results.json)")
    args = parser.parse_args()
    if args.replica is not None:
        replica(args.replica, args.log_level)
        return
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for system in systems:
        if system not in SYSTEMS:
            parser.error(f"--systems: unknown system {system!r} (known: {', '.join(SYSTEMS)})")
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not on PATH")
    versions = {
        "cronlease": probe(
            PY,
            "import cronlease, celery, redis, psycopg; print(cronlease.__version__)",
            "the cronlease replicas and the worker (cronlease, celery, redis, psycopg)",
        )
    }
    if any(s.startswith("redbeat") for s in systems):
        versions["celery-redbeat"] = probe(
            REDBEAT_PY,
            "import importlib.metadata as m, redbeat; print(m.version('celery-redbeat'))",
            "RedBeat's beats (set REDBEAT_PYTHON to a Python with celery-redbeat)",
        )
    versions["celery"] = probe(PY, "import celery; print(celery.__version__)", "Celery")
    header("beat_fleet: Celery's beat schedule on a fleet, cronlease vs RedBeat")
    print(
        f"replicas {args.replicas} x entries {args.entries} every 1 s; steady {args.seconds} s; "
        f"kills {args.kills} every ~{args.kill_every:g} s; worker processes {args.worker_procs}; "
        f"beat log level {args.log_level}; cronlease max_workers {args.max_workers or 16}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    signal.signal(signal.SIGTERM, on_sigterm)
    # started in the background by a shell, SIGINT would be ignored: Ctrl-C always cleans up
    signal.signal(signal.SIGINT, signal.default_int_handler)
    own_logs = args.logs is None
    logs = args.logs or Path(tempfile.mkdtemp(prefix="cronlease-beat-fleet-"))
    logs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    results: list[dict[str, Any]] = []
    try:
        with redis_server(logs) as server:
            args.redis_pid = server.pid
            client = redis.Redis(host="127.0.0.1", port=PORT, db=2)
            for system in systems:
                print(f"running {system} ...", flush=True)
                for phase, figures in run_system(system, args, logs, client, rng).items():
                    row = {"system": system, "phase": phase, **figures}
                    results.append(row)
                    print(json.dumps(row), flush=True)
    except BaseException:
        if own_logs:
            for log in sorted(logs.glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-5:]
                if tail:
                    print(f"--- {log.name} (last lines)", *tail, sep="\n", file=sys.stderr)
        raise
    finally:
        stop(STARTED)
        if own_logs:
            shutil.rmtree(logs, ignore_errors=True)
    print()
    table(
        [title for _, title in COLUMNS],
        [["-" if r.get(k) is None else r[k] for k, _ in COLUMNS] for r in results],
    )
    for r in results:
        if "send_late_p50_ms" in r:
            print(
                f"{r['system']} {r['phase']}: send lateness vs the slot p50 "
                f"{r['send_late_p50_ms']} ms, p99 {r['send_late_p99_ms']} ms"
            )
    write_json(
        args.json,
        "beat_fleet",
        {
            f"{r['system']}.{r['phase']}.{key}": float(value)
            for r in results
            for key, value in r.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        },
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit("interrupted: everything it started is stopped and removed") from None
