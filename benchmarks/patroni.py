"""Failover time and misses under a synchronous Patroni cluster (not part of the CI set).

The cluster of ``tests/processes/test_patroni.py`` (``tests/support/patroni.py``:
one etcd member, three Patroni-managed PostgreSQL 15 nodes, ``synchronous_mode:
true``, ``ttl`` 10 s, ``loop_wait`` 1 s) under ``--replicas`` replica processes
(``tests/support/patroni_replica.py``: ``tick`` every 1 s) on a libpq host list
with ``target_session_attrs=read-write``. Each of ``--rounds`` rounds:

- ``patronictl switchover --force`` to the synchronous standby;
- kill -9 of the leader's Patroni and postmaster; then the killed node is
  started again (it rewinds and follows) before the next round.

For each event: seconds until a new leader commits a write, seconds from that
to the next run of ``tick``, and the slots of ``tick`` missed; then medians and
maxima, and slots run twice over the whole run (the ledger is a SQLite file).

    python benchmarks/patroni.py [--rounds 3] [--replicas 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import ledger, patroni  # noqa: E402
from tests.support.procs import Proc, wait_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=3)
    args = parser.parse_args()
    reason = patroni.problem()
    if reason is not None:
        sys.exit(f"cannot run: {reason}")
    print("python benchmarks/patroni.py " + " ".join(sys.argv[1:]))
    cluster = patroni.PatroniCluster()
    replicas: list[Proc] = []
    events: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="cronlease-bench-") as tmp:
        ledger_url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        try:
            cluster.start()
            ledger.setup(ledger_url)
            replicas = [
                Proc("-m", "tests.support.patroni_replica", cluster.url(), ledger_url)
                for _ in range(args.replicas)
            ]
            for proc in replicas:
                proc.expect("started", timeout=60)
            wait_for(lambda: patroni.count(ledger_url, "tick#end") >= 3, 30, "runs of tick")
            for round_ in range(1, args.rounds + 1):
                candidate = wait_for(cluster.sync_standby, 60, "a synchronous standby")
                switch: list[subprocess.Popen[str]] = []
                figure = patroni.outage(
                    cluster,
                    ledger_url,
                    [candidate.port],
                    lambda candidate=candidate, switch=switch: switch.append(
                        cluster.switchover(candidate)
                    ),
                )
                switch[0].communicate(timeout=60)
                events.append(("switchover", figure))
                wait_for(cluster.healthy, 60, "a synchronous standby recorded")
                time.sleep(3)
                leader = cluster.leader()
                assert leader is not None
                others = [node.port for node in cluster.nodes if node is not leader]
                killed = leader
                events.append(
                    ("kill", patroni.outage(cluster, ledger_url, others, cluster.kill_leader))
                )
                cluster.relaunch(killed)
                wait_for(cluster.healthy, 120, lambda: f"the killed node back\n{cluster.logs()}")
                time.sleep(3)
                print(f"round {round_} done", flush=True)
        finally:
            for proc in replicas:
                proc.stop()
            cluster.cleanup()
        slots = [slot for slot, _ in ledger.entries(ledger_url, "tick")]
        twice = sum(1 for n in Counter(slots).values() if n > 1)
        overlaps = len(ledger.entries(ledger_url, "tick#overlap"))
        overlaps += len(ledger.entries(ledger_url, "long#overlap"))
    print(f"{'event':<11} {'writable after s':>16} {'tick resumed s':>14} {'missed':>6}")
    rows: dict[str, list[tuple[float, float, int]]] = {}
    for kind, figure in events:
        missed = len(patroni.misses(slots, figure["wall_start"], figure["wall_resumed"]))
        rows.setdefault(kind, []).append(
            (figure["writable_after"], figure["resumed_after"], missed)
        )
        print(
            f"{kind:<11} {figure['writable_after']:>16.1f} "
            f"{figure['resumed_after']:>14.1f} {missed:>6}"
        )
    for kind, values in rows.items():
        for index, label in ((0, "writable after"), (1, "tick resumed"), (2, "missed")):
            column = [value[index] for value in values]
            print(f"{kind} {label}: median {statistics.median(column):.1f}, max {max(column):.1f}")
    print(f"slots run twice: {twice}; overlaps: {overlaps}")


if __name__ == "__main__":
    main()
