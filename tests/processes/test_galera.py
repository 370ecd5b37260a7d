"""MariaDB Galera: three nodes on loopback ports (tests/support/galera.py), replicas on each.

On Galera a row lock is local to a node: two nodes can each run the
acquisition's upsert on a free lease row, each see its own nonce in RETURNING,
and only the COMMIT says who won — the one certified first; the other gets
error 1213 (a certification failure, or a brute-force abort of a transaction
still running). cronlease reads every result of the script, the COMMIT's
included, before it looks at any row (``do_execute`` in dialects/mysql.py),
so a failed COMMIT raises and the lease is never returned as won; the 1213
is retried once (§3.6), a retry fails certification again rather than
commit on a stale row, and a victim twice is refused ("contended"). These
tests check that with real processes:

- the race: worker processes on the three nodes released together for the
  same slot, round after round, counted at a ledger without a unique key:
  exactly one winner per slot; the 1213s (certification failures and
  brute-force aborts, read from the nodes' ``wsrep_local_*`` counters and the
  workers' "deadlock victim" lines) are counted, and none became a run;
- three Scheduler replicas, one per node, every second, started at once on a
  database without tables (they create them on three nodes): each slot once;
- one node killed -9 and restarted (IST): no slot twice, and its replica
  answers again within REJOIN_BOUND of the restart.

The side-effect ledger of the replicas is the suite's own MariaDB (url_for),
outside the cluster, so a killed node takes no ledger rows with it.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from cronlease._lease.store import LeaseStore
from tests.conftest import skip_or_fail, url_for
from tests.support import galera, ledger
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import Proc, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ha]

WORKERS_PER_NODE = 2
RACE_ROUNDS = 60
# replicas on the three nodes: seconds (the issue asks for 60: CRONLEASE_TEST_GALERA_SECONDS=60)
REPLICA_SECONDS = float(os.environ.get("CRONLEASE_TEST_GALERA_SECONDS", "20"))
# a killed node's replica answers again within this many seconds of the node's restart
REJOIN_BOUND = 30.0
DEADLOCK_LINE = "deadlock victim; retrying once"
REFUSED_LINE = "deadlock victim again; refused as contended"
# what a replica logs when its database answers again after an outage
AGAIN = "database available again"
UNAVAILABLE = "database unavailable"


def left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


@pytest.fixture(scope="module")
def cluster() -> Iterator[galera.Cluster]:
    skip_or_fail("galera", galera.problem())
    # a temporary table file of another server in the shared /tmp (the machine's MariaDB
    # keeps its #sql* files there, as the user our nodes run as): no node of ours may
    # delete it when it starts
    neighbours = Path(tempfile.gettempdir()) / f"#sql-cronlease-probe-{os.urandom(4).hex()}.MAI"
    neighbours.write_bytes(b"")
    if galera.USER:  # the machine's server's own: in the sticky /tmp, the nodes' user's
        shutil.chown(neighbours, galera.USER, galera.USER)
    made = galera.Cluster()
    try:
        started = time.monotonic()
        made.start()
        print(f"galera: three nodes synced in {time.monotonic() - started:.1f} s")
        store = LeaseStore.from_url(made.nodes[0].url)
        store.create_tables()
        store.dispose()
        yield made
    finally:
        made.cleanup()
        survived = neighbours.exists()
        neighbours.unlink(missing_ok=True)
    assert not made.root.exists()
    assert survived, "a node deleted another server's temporary table file in /tmp"


def create_ledger(node: galera.Node, table: str) -> None:
    with (
        pymysql.connect(
            host="127.0.0.1", port=node.port, user="root", database=galera.DATABASE
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute(
            f"CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
            " task VARCHAR(255) NOT NULL, slot BIGINT NOT NULL,"
            " fence BIGINT NOT NULL, pid INT NOT NULL)"
        )


def synced_rows(node: galera.Node, query: str) -> list[tuple[object, ...]]:
    """``query`` on ``node`` once it has applied every write set committed before it."""
    with (
        pymysql.connect(
            host="127.0.0.1", port=node.port, user="root", database=galera.DATABASE
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute("SET SESSION wsrep_sync_wait = 1")
        cursor.execute(query)
        return list(cursor.fetchall())


@pytest.mark.parametrize("mode", ["returning", "read-back", "statements"])
def test_workers_on_three_nodes_race_for_each_slot(
    cluster: galera.Cluster, tmp_path: Path, mode: str
) -> None:
    """``returning``: MariaDB's one-request script; ``read-back``: the script MySQL
    would run; ``statements``: one request per statement (an engine given to
    ``LeaseStore(engine)``), where the COMMIT is a request of its own."""
    name = f"galera-race-{os.urandom(6).hex()}"
    table = f"cronlease_test_galera_ledger_{os.urandom(4).hex()}"
    create_ledger(cluster.nodes[0], table)
    store = LeaseStore.from_url(cluster.nodes[0].url)
    first_slot = int(store.database_time() * 1000) - 60_000
    store.dispose()
    before = cluster.counters()
    workers = [
        Proc(
            "-m",
            "tests.support.mysql_race_worker",
            node.url,
            "READ COMMITTED",
            "+00:00",
            table,
            f"node{node.index}-racer{index}",
            env={"CRONLEASE_TEST_MYSQL_MODE": mode},
        )
        for node in cluster.nodes
        for index in range(WORKERS_PER_NODE)
    ]
    outcomes: list[list[str]] = []
    started = time.monotonic()
    try:
        deadline = time.monotonic() + 60
        for worker in workers:
            worker.expect("ready", left(deadline))
        for round_number in range(RACE_ROUNDS):
            slot = first_slot + round_number
            for worker in random.sample(workers, len(workers)):
                worker.send(f"go {slot} {name}")
            deadline = time.monotonic() + 60
            outcomes.append(
                [worker.expect("done", left(deadline)).split()[1] for worker in workers]
            )
    finally:
        for worker in workers:
            worker.stop()
    elapsed = time.monotonic() - started
    stderrs = [worker.stderr() for worker in workers]
    for index, err in enumerate(stderrs):
        (tmp_path / f"worker-{index}.err").write_text(err)
    after = cluster.counters()

    winners = [[o for o in round_ if o.startswith("won:")] for round_ in outcomes]
    assert [len(won) for won in winners] == [1] * RACE_ROUNDS, outcomes
    fences = [int(won[0].split(":")[1]) for won in winners]
    assert fences == list(range(1, RACE_ROUNDS + 1)), fences  # one fence per win, none twice
    rows = synced_rows(cluster.nodes[0], f"SELECT slot, fence, pid FROM {table} ORDER BY id")
    slots = [int(slot) for slot, _, _ in rows]  # type: ignore[call-overload]
    assert sorted(slots) == [first_slot + n for n in range(RACE_ROUNDS)], rows  # once each
    by_pid = Counter(pid for _, _, pid in rows)
    errors = Counter(o for round_ in outcomes for o in round_ if o.startswith("error"))
    retried = sum(err.count(DEADLOCK_LINE) for err in stderrs)
    refused = sum(err.count(REFUSED_LINE) for err in stderrs)
    conflicts = {key: after[key] - before[key] for key in after}
    print(
        f"galera race ({mode}): {RACE_ROUNDS} rounds x {len(workers)} processes on 3 nodes in"
        f" {elapsed:.1f} s; wins per process {sorted(by_pid.values(), reverse=True)};"
        f" 1213 retried once by the store: {retried}; a victim again, refused as contended:"
        f" {refused}; errors {dict(errors)}; node counters {conflicts}"
    )
    # the race was a race across nodes: conflicts happened, and none became a run
    assert len(by_pid) > 1, by_pid
    assert retried > 0, "no certification conflict: not a race"
    # a victim twice is a refusal (contended), not a database error
    assert not errors, (errors, [err for err in stderrs if "Traceback" in err][:1])


def test_replicas_on_three_nodes_run_each_slot_once(
    cluster: galera.Cluster, tmp_path: Path
) -> None:
    ledger_url = url_for("mysql", tmp_path)
    ledger.setup(ledger_url)
    name = f"galera-replicas-{os.urandom(6).hex()}"
    # a database without tables: the three replicas create them at once, on three nodes
    database = f"cronlease_galera_{os.urandom(4).hex()}"
    cluster.create_database(database)
    replicas = [
        Proc(
            "-m",
            "tests.support.replica",
            node.url_of(database),
            name,
            env={"CRONLEASE_TEST_LEDGER": ledger_url},
        )
        for node in cluster.nodes
    ]
    try:
        for replica in replicas:
            replica.expect("started", 60)
        started = time.monotonic()
        time.sleep(REPLICA_SECONDS)  # the span under test, not a wait for something
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0, 0, 0], [replica.stderr()[-2000:] for replica in replicas]
    entries = ledger.entries(ledger_url, name)
    slots = [slot for slot, _ in entries]
    by_pid = Counter(pid for _, pid in entries)
    print(
        f"galera replicas: {len(slots)} slots in {time.monotonic() - started:.0f} s on three"
        f" nodes; runs per replica {sorted(by_pid.values(), reverse=True)};"
        f' duplicates {len(slots) - len(set(slots))}; "unavailable" lines'
        f" {sum(replica.stderr().count(UNAVAILABLE) for replica in replicas)}"
    )
    assert len(slots) >= REPLICA_SECONDS - 3
    assert_every_slot_once(slots)


def test_a_node_killed_and_rejoining_runs_no_slot_twice(
    cluster: galera.Cluster, tmp_path: Path
) -> None:
    ledger_url = url_for("mysql", tmp_path)
    ledger.setup(ledger_url)
    name = f"galera-kill-{os.urandom(6).hex()}"
    replicas = [
        Proc(
            "-m",
            "tests.support.replica",
            node.url,
            name,
            env={"CRONLEASE_TEST_LEDGER": ledger_url},
        )
        for node in cluster.nodes
    ]
    victim = cluster.nodes[2]
    try:
        for replica in replicas:
            replica.expect("started", 60)
        # at work on three nodes: a few slots run, then the fault
        wait_for(lambda: len(ledger.entries(ledger_url, name)) >= 3, 30, "three ledger rows")
        again_before = replicas[2].stderr().count(AGAIN)
        cluster.kill(victim)
        killed_at = time.monotonic()
        for node in cluster.nodes[:2]:
            cluster.wait_synced(node, size=2, timeout=30)
        cluster.restart(victim)
        restarted_at, restarted_wall = time.monotonic(), time.time()
        rejoin = cluster.wait_synced(victim, timeout=120)
        wait_for(
            lambda: replicas[2].stderr().count(AGAIN) > again_before,
            REJOIN_BOUND,
            lambda: f"the killed node's replica back; stderr:\n{replicas[2].stderr()[-3000:]}",
        )
        back = time.monotonic() - restarted_at
        assert back < REJOIN_BOUND
        time.sleep(3)  # a few more slots with all three back
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0, 0, 0], [replica.stderr()[-2000:] for replica in replicas]
    ist = "IST received" in cluster.log_of(victim).read_text(errors="replace")
    entries = ledger.entries(ledger_url, name)
    slots = [slot for slot, _ in entries]
    missed = (max(slots) - min(slots)) // 1000 + 1 - len(set(slots))
    by_victim = [s for s, p in entries if p == replicas[2].popen.pid and s / 1000 > restarted_wall]
    print(
        f"galera kill -9: node{victim.index} down {restarted_at - killed_at:.1f} s, synced"
        f" {rejoin:.1f} s after restart ({'IST' if ist else 'SST'}); its replica answered again"
        f" {back:.1f} s after the restart ({len(by_victim)} slots run there since);"
        f" {len(slots)} slots, {missed} missed,"
        f" duplicates {len(slots) - len(set(slots))}"
    )
    assert not [s for s, n in Counter(slots).items() if n > 1], entries
