"""Patroni + etcd, synchronous mode, under three replicas: a switchover, then a crash.

The test starts etcd and three Patroni-managed PostgreSQL 15 nodes of its own
(``synchronous_mode: true``, ``ttl`` 10 s, ``loop_wait`` 1 s;
``tests/support/patroni.py``). Three replica processes connect through a libpq
host list over the three nodes with ``target_session_attrs=read-write``; their
ledger is a SQLite file, which survives everything. Under that load:

1. ``patronictl switchover --force`` to the synchronous standby;
2. kill -9 of the (new) leader's Patroni and postmaster, mid-run of ``long``:
   its leader key expires and the synchronous standby is promoted; then a
   replica is restarted (its catch-up of ``slow``, policy ``all``, re-runs
   nothing).

Asserted from the ledger: no (task, slot) twice, no overlap; from the history
table once the cluster is back: fences strictly increasing per task; ticks
resume within 20 s of the new leader committing a write. Misses (slots of
``tick``, every 1 s, that never ran) are counted and printed with the failover
times. Synchronous replication loses nothing committed, so unlike
``test_failover.py`` no lost writes are expected.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from cronlease.store import LeaseStore
from tests.conftest import skip_or_fail
from tests.support import ledger, patroni
from tests.support.procs import Proc, wait_for

TASKS = ("tick", "long", "slow")
LOST_WRITES = "the database lost committed lease writes"


@pytest.mark.slow
def test_a_synchronous_patroni_cluster_fails_over_under_three_replicas(tmp_path: Path) -> None:
    skip_or_fail("patroni", patroni.problem())
    cluster = patroni.PatroniCluster()
    replicas: list[Proc] = []
    figures: dict[str, dict[str, float]] = {}
    history: dict[str, list[tuple[int, int, str]]] = {}
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    try:
        # the replicas start on the leader while the other two nodes clone it: their
        # first runs and the cloning overlap; no fault before the cluster is healthy
        cluster.start(healthy=False)
        url = cluster.url()
        ledger.setup(ledger_url)
        replicas = [Proc("-m", "tests.support.patroni_replica", url, ledger_url) for _ in range(3)]
        for proc in replicas:
            proc.expect("started", timeout=60)
        wait_for(lambda: patroni.count(ledger_url, "tick#end") >= 3, 30, "runs of tick")
        wait_for(lambda: patroni.count(ledger_url, "long#end") >= 1, 30, "a run of long")
        wait_for(cluster.healthy, 120, lambda: f"a healthy cluster\n{cluster.logs()}")

        # (2) a switchover under load, to the synchronous standby
        candidate = wait_for(cluster.sync_standby, 30, "a synchronous standby")
        switch: list[subprocess.Popen[str]] = []
        figures["switchover"] = patroni.outage(
            cluster,
            ledger_url,
            [candidate.port],
            lambda: switch.append(cluster.switchover(candidate)),
        )
        said, _ = switch[0].communicate(timeout=60)
        assert "Successfully switched over" in said, f"{said}\n{cluster.logs()}"
        # Patroni fails over only to the standby its /sync key names: wait until it does
        began = time.monotonic()
        wait_for(cluster.healthy, 60, lambda: f"the old leader back as a replica\n{cluster.logs()}")
        print(f"switchover: a synchronous standby recorded {time.monotonic() - began:.1f} s later")
        ticks = patroni.count(ledger_url, "tick#end")

        # (1) kill -9 of the leader, mid-run of long, with ticks on since the switchover
        wait_for(
            lambda: (
                patroni.count(ledger_url, "tick#end") >= ticks + 2
                and patroni.in_flight(ledger_url, "long")
            ),
            30,
            "ticks on and a run of long in flight",
        )
        leader = cluster.leader()
        assert leader is not None
        others = [node.port for node in cluster.nodes if node is not leader]
        figures["kill"] = patroni.outage(cluster, ledger_url, others, cluster.kill_leader)
        # a replica restarted after the failover: its catch-up (slow: all) re-runs nothing;
        # it restarts while the survivor becomes the new leader's synchronous standby
        assert replicas[0].stop() == 0, replicas[0].stderr()
        replicas.append(Proc("-m", "tests.support.patroni_replica", url, ledger_url))
        replicas[-1].expect("started", timeout=60)
        wait_for(cluster.healthy, 60, lambda: f"the survivors streaming\n{cluster.logs()}")
        ticks = patroni.count(ledger_url, "tick#end")
        wait_for(lambda: patroni.count(ledger_url, "tick#end") >= ticks + 2, 30, "ticks on")

        # the ledger is complete: every run it saw is in the history. Stopped together:
        # each waits for its runs in flight (long: 2 s) to end.
        for proc in replicas[1:]:
            proc.send("stop")
        for proc in replicas[1:]:
            assert proc.popen.wait(timeout=30) == 0, proc.stderr()
        store = LeaseStore.from_url(url)
        try:
            for name in TASKS:
                history[name] = [
                    (run.slot, run.fence, str(run.outcome))
                    for run in store.history(name, limit=10_000)
                    if not run.manual
                ]
        finally:
            store.dispose()
    finally:
        for proc in replicas:
            proc.stop()
        cluster.cleanup()
    stderr = "\n".join(proc.stderr() for proc in replicas)

    tick_slots = [slot for slot, _ in ledger.entries(ledger_url, "tick")]
    for kind, figure in figures.items():
        missed = patroni.misses(tick_slots, figure["wall_start"], figure["wall_resumed"])
        print(
            f"{kind}: new leader writable after {figure['writable_after']:.1f} s, "
            f"tick resumed {figure['resumed_after']:.1f} s later "
            f"(outage {figure['outage']:.1f} s), {len(missed)} ticks of tick missed"
        )
    total = patroni.misses(tick_slots, min(tick_slots) / 1000, max(tick_slots) / 1000)
    print(f"tick: {len(tick_slots)} runs, {len(total)} missed over the whole test")
    for name in TASKS:  # a run that ended while no server took writes: outcome not recorded
        unrecorded = [
            (slot, outcome) for slot, _, outcome in history[name] if outcome != "succeeded"
        ]
        print(f"{name}: runs not recorded succeeded: {unrecorded}")
    for name in TASKS:
        slots = [slot for slot, _ in ledger.entries(ledger_url, name)]
        twice = {slot: n for slot, n in Counter(slots).items() if n > 1}
        assert not twice, f"{name}: slots run twice: {twice}\n{stderr}"
        overlaps = ledger.entries(ledger_url, f"{name}#overlap")
        assert not overlaps, f"{name}: runs overlapped: {overlaps}\n{stderr}"
        runs = sorted(history[name])
        assert runs, name
        fences = [fence for _, fence, _ in runs]
        assert all(a < b for a, b in itertools.pairwise(fences)), f"{name}: fences {runs}"
        # every run the ledger saw start is in the history: nothing committed was lost
        assert set(slots) <= {slot for slot, _, _ in runs}, f"{name}: {slots} vs {runs}"
    for kind, figure in figures.items():
        assert figure["resumed_after"] < patroni.RESUME_WITHIN, (kind, figure)
    assert LOST_WRITES not in stderr, stderr
