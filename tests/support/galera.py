"""A throw-away three-node MariaDB Galera cluster on loopback ports, for test_galera.py.

Each node is a ``mariadbd`` of its own (run as the ``mysql`` user when the tests
run as root: rsync's SST daemon would otherwise write as ``nobody``), with
its own datadir, socket, SQL port, group port (``gmcast.listen_addr``), IST
port (``ist.recv_addr``) and SST port, all on 127.0.0.1, under one temporary
directory that :meth:`Cluster.cleanup` stops and removes. The first node
bootstraps the cluster (``--wsrep-new-cluster``); the others join it by SST
(rsync). :meth:`Cluster.kill` is ``kill -9``; :meth:`Cluster.restart` recovers
the killed node's position (``--wsrep-recover``) and starts it again, so it
rejoins by IST. :func:`problem` says why a cluster cannot be made here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql

from tests.support.pgcluster import free_port

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
PROVIDER = "/usr/lib/galera/libgalera_smm.so"
SST_SCRIPT = "/usr/bin/wsrep_sst_rsync"
DATABASE = "cronlease_galera"
# the account the nodes run as when the tests run as root
USER = "mysql" if os.geteuid() == 0 else ""
# A killed node is declared dead after evs.suspect_timeout; writes on the others
# wait for that (the defaults: 5 s suspect, 15 s inactive).
PROVIDER_OPTIONS = (
    "evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S;evs.keepalive_period=PT0.5S;"
    "evs.inactive_check_period=PT0.5S;evs.install_timeout=PT4S;gcache.size=64M;"
    "pc.recovery=false"
)


def problem() -> str | None:
    """Why no cluster can be started here, or None."""
    missing = [
        path for path in (MARIADBD, INSTALL_DB, PROVIDER, SST_SCRIPT) if not os.path.exists(path)
    ]
    if missing:
        return f"MariaDB Galera binaries missing: {', '.join(missing)} (packages galera-4, rsync)"
    if shutil.which("rsync") is None:
        return "rsync is missing (the SST method of the test cluster)"
    return None


@dataclass
class Node:
    index: int
    port: int
    group_port: int
    ist_port: int
    sst_port: int
    data: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_of(DATABASE)

    def url_of(self, database: str) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{database}"


class Cluster:
    """Three nodes; every process and file is removed by :meth:`cleanup`."""

    def __init__(self, size: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cronlease-galera-"))
        if USER:
            shutil.chown(self.root, USER, USER)
        self.nodes = [
            Node(i, free_port(), free_port(), free_port(), free_port(), self.root / f"node{i}")
            for i in range(size)
        ]
        self.address = "gcomm://" + ",".join(f"127.0.0.1:{n.group_port}" for n in self.nodes)
        # A server deletes the #sql* files of its tmpdir when it starts (its own leftovers,
        # it assumes): with the default, /tmp, each node's start deleted the temporary
        # tables the machine's MariaDB was using for a multi-table UPDATE of another test
        # ("Error on delete of '/tmp/#sql-update-...'", once a crash of that server).
        for node in self.nodes:
            self.tmpdir(node).mkdir()
            if USER:
                shutil.chown(self.tmpdir(node), USER, USER)

    def tmpdir(self, node: Node) -> Path:
        return self.root / f"node{node.index}.tmp"

    # --- files ---------------------------------------------------------------

    def _config(self, node: Node) -> Path:
        path = self.root / f"node{node.index}.cnf"
        options = (
            f"gmcast.listen_addr=tcp://127.0.0.1:{node.group_port};"
            f"ist.recv_addr=127.0.0.1:{node.ist_port};{PROVIDER_OPTIONS}"
        )
        path.write_text(
            "[mariadbd]\n"
            f"datadir={node.data}\n"
            f"tmpdir={self.tmpdir(node)}\n"
            f"socket={self.root}/node{node.index}.sock\n"
            f"pid-file={self.root}/node{node.index}.pid\n"
            f"log-error={self.log_of(node)}\n"
            f"port={node.port}\n"
            "bind-address=127.0.0.1\n" + (f"user={USER}\n" if USER else "") + "skip-name-resolve\n"
            "binlog_format=ROW\n"
            "default_storage_engine=InnoDB\n"
            "innodb_autoinc_lock_mode=2\n"
            "innodb_buffer_pool_size=32M\n"
            "innodb_log_file_size=32M\n"
            "innodb_flush_log_at_trx_commit=0\n"
            "max_connections=200\n"
            "wsrep_on=ON\n"
            f"wsrep_provider={PROVIDER}\n"
            f"wsrep_provider_options={options}\n"
            "wsrep_cluster_name=cronlease_test\n"
            f"wsrep_cluster_address={self.address}\n"
            f"wsrep_node_name=node{node.index}\n"
            "wsrep_node_address=127.0.0.1\n"
            f"wsrep_node_incoming_address=127.0.0.1:{node.port}\n"
            f"wsrep_sst_receive_address=127.0.0.1:{node.sst_port}\n"
            "wsrep_sst_method=rsync\n"
            "wsrep_slave_threads=2\n"
        )
        return path

    def log_of(self, node: Node) -> Path:
        return self.root / f"node{node.index}.log"

    def log_tail(self, node: Node, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_of(node).read_text(errors="replace")[-chars:]
        return ""

    # --- lifecycle -------------------------------------------------------------

    def start(self, timeout: float = 120) -> None:
        """Bootstrap node 0, join the others one by one; wait until all three are synced."""
        first = self.nodes[0]
        subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={first.data}",
                f"--tmpdir={self.tmpdir(first)}",
                *([f"--user={USER}"] if USER else []),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        for node in self.nodes[1:]:  # empty: filled by SST (rsync) when it joins
            node.data.mkdir()
            if USER:
                shutil.chown(node.data, USER, USER)
        self._spawn(first, "--wsrep-new-cluster")
        self.wait_synced(first, size=1, timeout=timeout)
        with self.connect(first) as conn, conn.cursor() as cursor:
            cursor.execute("CREATE USER IF NOT EXISTS root@'127.0.0.1'")
            cursor.execute("GRANT ALL ON *.* TO root@'127.0.0.1' WITH GRANT OPTION")
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        for size, node in enumerate(self.nodes[1:], start=2):
            self._spawn(node)
            self.wait_synced(node, size=size, timeout=timeout)
        for node in self.nodes:
            self.wait_synced(node, size=len(self.nodes), timeout=timeout)

    def _spawn(self, node: Node, *extra: str) -> None:
        config = self._config(node)
        node.process = subprocess.Popen(
            [MARIADBD, f"--defaults-file={config}", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            **({"user": USER, "group": USER} if USER else {}),
        )

    def connect(self, node: Node, timeout: float = 3) -> pymysql.connections.Connection:
        """A root connection by the node's socket (autocommit)."""
        return pymysql.connect(
            unix_socket=str(self.root / f"node{node.index}.sock"),
            user="root",
            connect_timeout=timeout,
            read_timeout=10,
            autocommit=True,
        )

    def status(self, node: Node) -> dict[str, str]:
        """The node's ``wsrep%`` status variables (empty if it does not answer)."""
        try:
            with self.connect(node, timeout=1) as conn, conn.cursor() as cursor:
                cursor.execute("SHOW GLOBAL STATUS LIKE 'wsrep%'")
                return {str(name): str(value) for name, value in cursor.fetchall()}
        except pymysql.MySQLError:
            return {}

    def synced(self, node: Node, size: int | None = None) -> bool:
        status = self.status(node)
        return (
            status.get("wsrep_ready") == "ON"
            and status.get("wsrep_local_state_comment") == "Synced"
            and status.get("wsrep_cluster_size") == str(size or len(self.nodes))
        )

    def wait_synced(self, node: Node, size: int | None = None, timeout: float = 120) -> float:
        """Seconds until ``node`` is synced in a cluster of ``size``; fails at ``timeout``."""
        started = time.monotonic()
        while not self.synced(node, size):
            if node.process is not None and node.process.poll() is not None:
                raise AssertionError(
                    f"galera node{node.index} exited ({node.process.returncode}):\n"
                    + self.log_tail(node)
                )
            if time.monotonic() - started > timeout:
                raise AssertionError(
                    f"galera node{node.index} not synced within {timeout} s: "
                    f"{self.status(node)}\n{self.log_tail(node)}"
                )
            time.sleep(0.2)
        return time.monotonic() - started

    def create_database(self, name: str) -> None:
        """An empty database (replicated to every node: DDL is total-order isolated)."""
        with self.connect(self.nodes[0]) as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")

    def counters(self) -> dict[str, int]:
        """Certification failures and brute-force aborts, summed over the nodes that answer."""
        total = {"wsrep_local_cert_failures": 0, "wsrep_local_bf_aborts": 0}
        for node in self.nodes:
            status = self.status(node)
            for name in total:
                total[name] += int(status.get(name, 0))
        return total

    def kill(self, node: Node) -> None:
        """``kill -9``: no shutdown, no goodbye to the group."""
        assert node.process is not None
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(timeout=30)

    def restart(self, node: Node) -> None:
        """Start a killed node again at its recovered position, so it rejoins by IST."""
        config = self._config(node)
        recovered = subprocess.run(
            [
                MARIADBD,
                f"--defaults-file={config}",
                "--wsrep-recover",
                "--log-error=" + str(self.root / f"node{node.index}.recover.log"),
            ],
            capture_output=True,
            timeout=120,
            check=False,
            **({"user": USER, "group": USER} if USER else {}),
        )
        log = (self.root / f"node{node.index}.recover.log").read_text(errors="replace")
        found = re.findall(r"Recovered position: (\S+:-?\d+)", log + recovered.stderr.decode())
        extra = [f"--wsrep-start-position={found[-1]}"] if found else []
        self._spawn(node, *extra)

    def cleanup(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)
