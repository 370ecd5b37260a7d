"""A throw-away Patroni cluster: one etcd member and three PostgreSQL 15 nodes.

Debian's ``patroni`` and ``etcd-server`` packages; everything on loopback ports
of its own, data under one temporary directory that :meth:`PatroniCluster.cleanup`
removes after stopping every process (nothing is left behind, passed or failed).
``bootstrap.dcs`` has ``synchronous_mode: true`` and a short ``ttl`` (10 s) and
``loop_wait`` (1 s), so a failover takes seconds. Patroni and PostgreSQL run as
the ``postgres`` user (``setpriv``, so the process started is Patroni itself).
:func:`problem` says why a cluster cannot be made here (then the test skips).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.support import ledger, pgcluster
from tests.support.procs import process_gone, wait_for

PATRONI = shutil.which("patroni") or "/usr/bin/patroni"
PATRONICTL = shutil.which("patronictl") or "/usr/bin/patronictl"
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
SCOPE = "cronlease-test"
RESUME_WITHIN = 20.0  # s from a new leader accepting writes to the next run of tick


def problem() -> str | None:
    """Why a Patroni cluster cannot be made here, or None."""
    for path, package in ((PATRONI, "patroni"), (PATRONICTL, "patroni"), (ETCD, "etcd-server")):
        if not os.access(path, os.X_OK):
            return f"{Path(path).name} is missing (Debian package {package})"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv is missing (needed to run Patroni as the postgres user)"
    return pgcluster.problem()


@dataclass
class Node:
    name: str
    port: int  # PostgreSQL
    api: int  # Patroni's REST API
    data: Path
    config: Path
    proc: subprocess.Popen[bytes] | None = None

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


class PatroniCluster:
    """etcd and three Patroni nodes; :meth:`start` waits for a writable leader."""

    def __init__(self, nodes: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cronlease-patroni-"))
        os.chmod(self.root, 0o755)
        self.etcd_port = pgcluster.free_port()
        self.etcd_peer = pgcluster.free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.nodes = [
            Node(
                f"node{i}",
                pgcluster.free_port(),
                pgcluster.free_port(),
                self.root / f"node{i}",
                self.root / f"node{i}.yml",
            )
            for i in range(1, nodes + 1)
        ]
        self.killed: set[str] = set()

    # --- start -----------------------------------------------------------------

    def _config(self, node: Node) -> str:
        return json.dumps(  # JSON is YAML
            {
                "scope": SCOPE,
                "namespace": f"/{self.root.name}/",
                "name": node.name,
                "log": {"level": "INFO", "dir": str(self.root / f"{node.name}-log")},
                "restapi": {
                    "listen": f"127.0.0.1:{node.api}",
                    "connect_address": f"127.0.0.1:{node.api}",
                },
                "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
                "bootstrap": {
                    "dcs": {
                        "ttl": 10,
                        "loop_wait": 1,
                        "retry_timeout": 4,
                        "maximum_lag_on_failover": 16 * 1024 * 1024,
                        "synchronous_mode": True,
                        "postgresql": {
                            "use_pg_rewind": True,
                            "use_slots": True,
                            "parameters": {
                                "wal_level": "replica",
                                "hot_standby": "on",
                                "max_wal_senders": 10,
                                "max_replication_slots": 10,
                                "wal_log_hints": "on",
                                "fsync": "off",
                                "wal_receiver_timeout": "2s",
                                "wal_retrieve_retry_interval": "500ms",
                            },
                        },
                    },
                    "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, "no-sync"],
                    "pg_hba": [
                        "local all all trust",
                        "host replication all 127.0.0.1/32 trust",
                        "host all all 127.0.0.1/32 trust",
                    ],
                },
                "postgresql": {
                    "listen": f"127.0.0.1:{node.port}",
                    "connect_address": f"127.0.0.1:{node.port}",
                    "data_dir": str(node.data),
                    "bin_dir": str(pgcluster.BIN),
                    "pgpass": str(self.root / f"{node.name}.pgpass"),
                    "authentication": {
                        "superuser": {"username": "postgres", "password": "postgres"},
                        "replication": {"username": "postgres", "password": "postgres"},
                    },
                    "parameters": {"unix_socket_directories": str(self.root)},
                    "pg_ctl_timeout": 30,
                },
                "tags": {"nofailover": False, "noloadbalance": False},
            }
        )

    def start(self, timeout: float = 120, *, healthy: bool = True) -> None:
        """Start etcd and the three nodes; return once :meth:`healthy`, or with
        ``healthy=False`` once the first node leads and commits a write (the other two
        cloning it meanwhile: wait for :meth:`healthy` before a fault)."""
        etcd_data = self.root / "etcd"
        with open(self.root / "etcd.log", "wb") as log:
            self.etcd = subprocess.Popen(
                [
                    ETCD,
                    "--name=cronlease",
                    f"--data-dir={etcd_data}",
                    f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                    f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                    f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                    f"--initial-cluster=cronlease=http://127.0.0.1:{self.etcd_peer}",
                    "--initial-cluster-state=new",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
            )
        wait_for(self._etcd_up, 30, lambda: f"etcd to answer:\n{self.log('etcd')}", interval=0.2)
        for node in self.nodes:
            (self.root / f"{node.name}-log").mkdir()
            node.config.write_text(self._config(node))
            if os.geteuid() == 0:
                for path in (node.config, self.root / f"{node.name}-log"):
                    shutil.chown(path, "postgres", "postgres")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        # the first node bootstraps; the others clone it once it leads
        self._launch(self.nodes[0])
        wait_for(
            lambda: self.leader() is not None,
            timeout,
            lambda: f"a leader:\n{self.logs()}",
            interval=0.5,
        )
        for node in self.nodes[1:]:
            self._launch(node)
        if not healthy:
            wait_for(self._leader_writes, timeout, lambda: f"a leader writing:\n{self.logs()}")
            return
        wait_for(self.healthy, timeout, lambda: f"a healthy cluster:\n{self.logs()}", interval=0.5)

    def _leader_writes(self) -> bool:
        leader = self.leader()
        return leader is not None and writable(leader.port)

    def _launch(self, node: Node) -> None:
        prefix: list[str] = []
        if os.geteuid() == 0:
            prefix = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PYTHON"))}
        env["HOME"] = str(self.root)
        with open(self.root / f"{node.name}.out", "ab") as out:
            node.proc = subprocess.Popen(
                [*prefix, "/usr/bin/python3", PATRONI, str(node.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=env,
                start_new_session=True,
            )

    def _etcd_up(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.etcd_port}/health", timeout=1
            ) as answer:
                return bool(json.load(answer).get("health") == "true")
        except (OSError, ValueError):
            return False

    # --- state -----------------------------------------------------------------

    def members(self) -> list[dict[str, object]]:
        """Patroni's ``/cluster`` from any live node ([] if none answers)."""
        for node in self.nodes:
            if node.name in self.killed:
                continue
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{node.api}/cluster", timeout=1
                ) as answer:
                    return list(json.load(answer).get("members", []))
            except (OSError, ValueError):
                continue
        return []

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def leader(self) -> Node | None:
        """The node the DCS names leader, if its PostgreSQL is running."""
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") == "running":
                return self.node(str(member["name"]))
        return None

    def sync_standby(self) -> Node | None:
        for member in self.members():
            if member.get("role") == "sync_standby" and member.get("state") == "running":
                return self.node(str(member["name"]))
        return None

    def healthy(self) -> bool:
        """A leader that commits a write, and every live replica streaming from it; with
        a replica left, one of them synchronous *and named so in the DCS* (Patroni's
        ``/sync`` key): in synchronous mode Patroni promotes only that one, so a leader
        lost before it is recorded leaves the cluster without a leader."""
        leader = self.leader()
        if leader is None or not writable(leader.port):
            return False
        alive = len(self.nodes) - len(self.killed) - 1
        if alive and self.sync_standby() is None:
            return False
        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=leader.port,
                user="postgres",
                dbname="postgres",
                connect_timeout=2,
                autocommit=True,
            ) as conn:
                rows = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
                ).fetchall()
        except psycopg.Error:
            return False
        states = [row[0] for row in rows]
        return len(states) == alive and (alive == 0 or "sync" in states)

    def url(self) -> str:
        """SQLAlchemy's form of a libpq host list over every node, read-write only."""
        hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in self.nodes)
        return f"postgresql://postgres@/postgres?{hosts}&target_session_attrs=read-write"

    def log(self, name: str) -> str:
        parts = []
        for path in (
            sorted(self.root.glob(f"{name}*.log"))
            + sorted(self.root.glob(f"{name}-log/*"))
            + sorted(self.root.glob(f"{name}.out"))
        ):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def logs(self) -> str:
        return "\n".join(self.log(node.name) for node in self.nodes)

    # --- faults ----------------------------------------------------------------

    def kill_leader(self) -> Node:
        """kill -9 of the leader's Patroni and its postmaster, as a crash of the host
        would: its leader key expires after ``ttl`` and the synchronous standby is
        promoted. The killed node stays down."""
        leader = self.leader()
        assert leader is not None, "no leader to kill"
        postmaster = leader.postmaster_pid()
        assert leader.proc is not None
        os.kill(leader.proc.pid, signal.SIGKILL)
        if postmaster is not None:
            os.kill(postmaster, signal.SIGKILL)
        leader.proc.wait(timeout=10)
        self.killed.add(leader.name)
        if postmaster is not None:
            wait_for(lambda: process_gone(postmaster), 10, "the postmaster to die")
        return leader

    def relaunch(self, node: Node) -> None:
        """Start a killed node's Patroni again (it rewinds and follows the new leader)."""
        self.killed.discard(node.name)
        self._launch(node)

    def switchover(self, candidate: Node) -> subprocess.Popen[str]:
        """``patronictl switchover --force`` to ``candidate``, started (not waited for)."""
        leader = self.leader()
        assert leader is not None, "no leader to switch over from"
        return subprocess.Popen(
            [
                "/usr/bin/python3",
                PATRONICTL,
                "-c",
                str(leader.config),
                "switchover",
                SCOPE,
                "--leader",
                leader.name,
                "--candidate",
                candidate.name,
                "--force",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.root,
        )

    # --- cleanup ---------------------------------------------------------------

    def cleanup(self) -> None:
        """Stop everything at once and remove it. Nothing of the cluster is kept, so no
        graceful stop (Patroni's, on SIGTERM, took 4 s: a synchronous standby first waits
        to be released): SIGKILL to each Patroni's process group (a ``pg_basebackup`` or
        ``pg_rewind`` it runs goes with it), then SIGQUIT to each postmaster, PostgreSQL's
        immediate shutdown (it ends its children and releases its shared memory)."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.proc.pid, signal.SIGKILL)  # its own session
        postmasters: list[int] = []
        for node in self.nodes:
            if node.proc is not None:
                node.proc.wait(timeout=10)
            pid = node.postmaster_pid()
            if pid is not None and node.name not in self.killed and not process_gone(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGQUIT)
                    postmasters.append(pid)
        for pid in postmasters:
            try:
                wait_for(lambda pid=pid: process_gone(pid), 10)
            except AssertionError:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(AssertionError):
                    wait_for(lambda pid=pid: process_gone(pid), 10)
        for name in self.killed:
            release_shared_memory(self.node(name).data)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def release_shared_memory(data: Path) -> None:
    """Remove the System V segment a postmaster killed -9 leaves behind (its
    ``postmaster.pid`` names it; no other exit leaves it): once nothing is attached
    to it, it is no one's, and it would outlive the test."""
    try:
        key, shmid = (int(n) for n in (data / "postmaster.pid").read_text().splitlines()[6].split())
        with open("/proc/sysvipc/shm") as table:
            rows = [line.split() for line in table.read().splitlines()[1:]]
    except (OSError, ValueError, IndexError):
        return
    # columns: key shmid perms size cpid lpid nattch ...
    if any(row[:2] == [str(key), str(shmid)] and row[6] == "0" for row in rows):
        with contextlib.suppress(OSError):  # no ipcrm: it stays, as before
            subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True, check=False)


def writable(port: int, timeout: float = 2.0) -> bool:
    """True if the server at ``port`` commits a transaction that has a transaction id
    (so it waits for the synchronous standby) within ``timeout``."""
    try:
        conn = psycopg.connect(
            host="127.0.0.1",
            port=port,
            user="postgres",
            dbname="postgres",
            connect_timeout=max(1, int(timeout)),
        )
    except psycopg.Error:
        return False
    cancelled = threading.Event()

    def cancel() -> None:
        cancelled.set()  # a cancelled wait for the standby still commits locally
        conn.cancel()

    timer = threading.Timer(timeout, cancel)
    timer.start()
    try:
        with conn:
            conn.execute("SELECT txid_current()")
        return not cancelled.is_set()
    except psycopg.Error:
        return False
    finally:
        timer.cancel()
        conn.close()


def wait_writable(
    ports: list[int], timeout: float, cluster: PatroniCluster | None = None
) -> tuple[int, float]:
    """(port, time.monotonic()) of the first of ``ports`` to commit a write."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for port in ports:
            if writable(port, timeout=1.0):
                return port, time.monotonic()
        time.sleep(0.1)
    state = f"{cluster.members()}\n{cluster.logs()}" if cluster is not None else ""
    raise AssertionError(f"none of {ports} accepted writes within {timeout} s\n{state}")


def count(ledger_url: str, name: str) -> int:
    return len(ledger.entries(ledger_url, name))


def in_flight(ledger_url: str, name: str) -> bool:
    return count(ledger_url, name) > count(ledger_url, f"{name}#end")


def misses(slots: list[int], start: float, end: float) -> list[int]:
    """Slots of ``tick`` (every 1 s) scheduled in [start, end] (epoch s) never run."""
    seen = set(slots)
    first = int(start) * 1000 + 1000
    return [slot for slot in range(first, int(end * 1000) + 1, 1000) if slot not in seen]


def outage(
    cluster: PatroniCluster,
    ledger_url: str,
    ports: list[int],
    trigger: Callable[[], object],
) -> dict[str, float]:
    """Run ``trigger()`` under replicas running ``tick`` every 1 s (``patroni_replica.py``):
    seconds from it to a new leader on ``ports`` committing a write, and from that to
    the next run of ``tick`` starting (``RESUME_WITHIN`` at most)."""
    wall = time.time()
    began = time.monotonic()
    trigger()
    _, writable = wait_writable(ports, 60, cluster)
    runs = count(ledger_url, "tick")
    resumed = wait_for(
        lambda: count(ledger_url, "tick") > runs and time.monotonic(),
        RESUME_WITHIN,
        lambda: f"a run of tick after the new leader accepted writes\n{cluster.logs()}",
        interval=0.05,
    )
    return {
        "wall_start": wall,
        "wall_resumed": wall + (resumed - began),
        "writable_after": writable - began,
        "resumed_after": resumed - writable,
        "outage": resumed - began,
    }
