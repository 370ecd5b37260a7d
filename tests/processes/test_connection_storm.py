"""More replicas than the server has connections for: the ones left out back off, say so,
and get to work once connections free (docs/design.md §8).

A throw-away PostgreSQL cluster (tests/support/pgcluster.py) with
``max_connections = 10`` (3 reserved for superusers: 7 for the replicas' role)
and nine replica processes, the same seven tasks every second each, ledger in files
(seven: each second, about one tick for each replica at work, so each of them
runs a tick within a few seconds, where one task took the seven some 20 s to
have each been preferred once).
Before issue 14 (the 60-replica, ``max_connections = 50`` storm: 15 replicas
never connected, one warning each and then silence, and the server log took
1,816 FATAL lines) a replica left out asked the server again on every tick
and every retry, and nothing said it had no connection. Here:

- every replica left out says so in ``health()`` (the server's refusal);
- the server log's FATAL lines stay within what the backoff allows;
- once three connected replicas stop, the ones left out run ticks;
- no slot runs twice.

The larger run (60 replicas, ``max_connections = 50``) is
``benchmarks/storm.py``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from tests.support import pgcluster
from tests.support.procs import Proc, terminate_all, wait_for

pytestmark = pytest.mark.slow

REPLICAS = 9
SLOTS = 7  # max_connections 10 less superuser_reserved_connections 3
TASKS = 7  # every second, each replica's tasks: about one tick per working replica
ROLE = "storm"
WINDOW = 10.0  # any window of 7.75 to 15 s has the same bound per replica (below)


def health(replica: Proc) -> dict[str, object]:
    replica.send("health")
    line = replica.expect("health ", timeout=30)
    report = json.loads(line[len("health ") :])
    assert isinstance(report, dict)
    return report


def fatal_lines(log: Path) -> int:
    return sum("FATAL:" in line for line in log.read_text(errors="replace").splitlines())


def test_replicas_left_out_by_a_full_server_back_off_say_so_and_join_later() -> None:
    problem = pgcluster.problem()
    if problem:
        pytest.skip(problem)
    clusters = pgcluster.Clusters()
    ledgers = Path(tempfile.mkdtemp(prefix="cronlease-storm-"))
    replicas: list[Proc] = []
    try:
        port = pgcluster.free_port()
        data = clusters.primary(
            port, {"max_connections": "10", "superuser_reserved_connections": "3"}
        )
        admin = create_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
        )
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {ROLE} LOGIN")
            conn.exec_driver_sql(f"GRANT CREATE ON SCHEMA public TO {ROLE}")
        url = f"postgresql://{ROLE}@127.0.0.1:{port}/postgres"
        for index in range(REPLICAS):
            replicas.append(
                Proc(
                    "-m", "tests.support.storm_replica", url, str(ledgers / f"{index}"), str(TASKS)
                )
            )
        for replica in replicas:
            replica.expect("started", timeout=60)

        # Seven replicas work; two never got a connection and say why.
        def settled() -> bool:
            reports = [health(replica) for replica in replicas]
            working = [r for r in reports if r["ran"]]
            return len(working) == SLOTS and all(r["refused"] for r in reports if not r["ran"])

        wait_for(settled, 60, f"{SLOTS} replicas running, the others refused", interval=0.5)
        left_out = [replica for replica in replicas if not health(replica)["ran"]]
        assert len(left_out) == REPLICAS - SLOTS
        for replica in left_out:
            report = health(replica)
            assert not report["ok"]
            text = " ".join(map(str, report["problems"]))  # type: ignore[call-overload]
            assert "no new connection to the database" in text, text
            assert "connection slots are reserved" in text or "too many clients" in text, text

        # The left-out ones back off: a few attempts each, not one or two a second
        # (each attempt is a FATAL line: "remaining connection slots are reserved").
        log = clusters.log_of(data)
        before = fatal_lines(log)
        threading.Event().wait(WINDOW)  # what is measured is what happens in it
        during = fatal_lines(log) - before
        # Backoff waits of at least 0.25, 0.5, 1, 2, 4, 7.5, 7.5 s: six attempts begin
        # within 7.75 s and the next 7.5 s later, so at most 7 lines per replica in any
        # 10 s (the seventh begun before the window); a replica asking at every tick:
        # 10 or more (with the backoff taken out, the two left out logged 30).
        assert during <= len(left_out) * 7 + 2, f"{during} FATAL lines in {WINDOW:.0f} s"

        # Three working replicas stop: their connections free, the others get to work.
        working = [replica for replica in replicas if replica not in left_out]
        codes = terminate_all(working[:3])
        assert codes == [0] * 3, [replica.stderr()[-2000:] for replica in working[:3]]
        wait_for(
            lambda: all(health(replica)["ran"] for replica in left_out),
            60,
            "the replicas left out run ticks once connections free",
            interval=0.5,
        )
    finally:
        codes = terminate_all(replicas)
        clusters.cleanup()
        runs = [
            line for path in ledgers.iterdir() for line in path.read_text().splitlines() if line
        ]
        shutil.rmtree(ledgers, ignore_errors=True)
    assert all(code == 0 for code in codes), [r.stderr()[-2000:] for r in replicas]
    assert len(runs) == len(set(runs)), "a slot ran twice"
    stderr = "".join(replica.stderr() for replica in replicas)
    assert "Traceback" not in stderr, stderr[-3000:]
