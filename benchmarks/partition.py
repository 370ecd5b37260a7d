"""Recovery from a network partition, round by round (not part of the CI set).

The scenario of ``tests/processes/test_partition.py``, repeated: replica A in
a network namespace of its own reaches PostgreSQL through a veth pair and a
TCP proxy, replica B runs beside the database (``tests/support/partition_replica.py``:
``PREFIX-long``, every 1 s with a 2 s lease TTL, runs until ``ctx.lost``;
``PREFIX-0`` .. ``PREFIX-7`` every 1 s return at once). While A runs the long
task, every packet from the host to A is dropped (iptables in A's namespace)
for ``--cut`` seconds, starting 4 s after B started, then the rule goes. Each round has a namespace,
replicas and tasks of its own. Per round:

- lost: seconds from the cut until A's run sees ``ctx.lost``;
- B takes over: from the cut until B starts the long task;
- A back: from the healing until A starts a run again;
- missed: slots of the eight short tasks not run, from the cut until A is back;
- twice: (task, slot) run twice in the round (any task);
- A's WARNING and ERROR lines from the cut until A is back (plus 5 s): expected, the
  outage's two (a statement unanswered for 5 s starts it) and the lines of the run it
  cut short (its lease, the task's failure alert, an outcome it could not record);
- skipped: the count A's "available again" line gives, against the ticks of its nine
  tasks that came due in the outage it reported and that it did not run.

Needs root (namespaces, iptables) and the test PostgreSQL
(``CRONLEASE_BENCH_POSTGRES_URL``).

    python benchmarks/partition.py [--rounds 3] [--cut 10] [--lines]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy.engine import make_url  # noqa: E402

from benchmarks._common import header, median, postgres_url, table  # noqa: E402
from tests.processes.test_partition import lost_at, starts  # noqa: E402
from tests.support import ledger, netns  # noqa: E402
from tests.support.procs import Proc, wait_for  # noqa: E402
from tests.support.tcpproxy import TcpProxy  # noqa: E402

SHORT = 8  # PREFIX-0 .. PREFIX-7
SETTLE = 4.0  # seconds between B's start and the cut


def one_round(url: str, cut_for: float) -> tuple[dict[str, float], list[str]]:
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    long = f"{prefix}-long"
    parsed = make_url(url)
    with netns.Namespace() as ns:
        proxy = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432, host=ns.host_address)
        proxy.up()
        a_url = parsed.set(host=ns.host_address, port=proxy.port)
        script = ("-m", "tests.support.partition_replica")
        a = Proc(*script, a_url.render_as_string(hide_password=False), prefix, prefix=ns.exec)
        b: Proc | None = None
        try:
            a.expect("started", 60)
            wait_for(lambda: starts(a, long), 60, "A running the long task")
            b = Proc(*script, url, prefix)
            b.expect("started", 60)
            # B's first ticks and its membership before the cut (the test cuts at once: a
            # tick missed here would be B's start-up, not the partition's)
            time.sleep(SETTLE)
            if lost_at(a, long) is not None:
                raise RuntimeError("A's long run ended before the cut: rerun")
            ns.cut()
            cut_at = time.time()
            try:
                lost = wait_for(lambda: lost_at(a, long), 60, "A's run told its lease is lost")
                assert lost is not None
                taken = wait_for(
                    lambda: [at for _, at in starts(b, long) if at > cut_at], 60, "B taking over"
                )
                time.sleep(max(0.0, cut_at + cut_for - time.time()))
            finally:
                ns.heal()
            healed_at = time.time()

            def a_back() -> float | None:
                after = [
                    at
                    for name in (long, *(f"{prefix}-{i}" for i in range(SHORT)))
                    for _, at in starts(a, name)
                    if at > healed_at
                ]
                return min(after) if after else None

            back_at = wait_for(a_back, 120, "A running a tick again")
            assert back_at is not None
            time.sleep(5)
            assert a.terminate(30) == 0, a.stderr()
            assert b.terminate(30) == 0, b.stderr()
        finally:
            for proc in (a, b):
                if proc is not None:
                    proc.kill()
            proxy.down()
    rows = ledger.rows_like(url, prefix)
    twice = sum(n - 1 for n in Counter((name, slot) for name, slot, _ in rows).values() if n > 1)
    ran = {(name, slot) for name, slot, _ in rows}
    seconds = range(math.ceil(cut_at), math.floor(back_at) + 1)
    missed = sum(
        (f"{prefix}-{i}", second * 1000) not in ran for i in range(SHORT) for second in seconds
    )
    said = [
        line
        for line in a.stderr().splitlines()
        if (" WARNING " in line or " ERROR " in line)
        and cut_at <= float(line.split()[0]) <= back_at + 5
    ]
    said_skipped, due = -1, -1
    for line in said:
        found = re.search(r"available again after ([0-9.]+) s; (\d+) tick", line)
        if found:
            ended = float(line.split()[0])
            began = ended - float(found[1])
            names = (long, *(f"{prefix}-{i}" for i in range(SHORT)))
            mine = {(name, slot) for name, slot, pid in rows if pid == a.popen.pid}
            said_skipped = int(found[2])
            due = sum(
                (name, second * 1000) not in mine
                for name in names
                for second in range(math.ceil(began), math.floor(ended) + 1)
            )
    figures = {
        "lost": lost - cut_at,
        "takeover": min(taken) - cut_at,
        "back": back_at - healed_at,
        "missed": missed,
        "slots": len(seconds) * SHORT,
        "twice": twice,
        "lines": len(said),
        "skipped": said_skipped,
        "due": due,
    }
    return figures, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cut", type=float, default=10.0, help="seconds the partition lasts")
    parser.add_argument("--lines", action="store_true", help="print A's warnings and errors")
    args = parser.parse_args()
    reason = netns.problem()
    if reason is not None:
        sys.exit(f"cannot run: {reason}")
    url = postgres_url()
    ledger.setup(url)
    header(f"network partition of {args.cut:g} s, {args.rounds} rounds")
    rounds = []
    for number in range(1, args.rounds + 1):
        figures, said = one_round(url, args.cut)
        rounds.append(figures)
        if args.lines:
            print(f"round {number}: A's warnings and errors ({len(said)})")
            print("\n".join(said))
            print()
    rows = [
        [
            number,
            f"{r['lost']:.2f}",
            f"{r['takeover']:.2f}",
            f"{r['back']:.2f}",
            f"{r['missed']:.0f} of {r['slots']:.0f}",
            f"{r['twice']:.0f}",
            f"{r['lines']:.0f}",
            f"{r['skipped']:.0f} of {r['due']:.0f}",
        ]
        for number, r in enumerate(rounds, 1)
    ]
    rows.append(
        [
            "median",
            f"{median(r['lost'] for r in rounds):.2f}",
            f"{median(r['takeover'] for r in rounds):.2f}",
            f"{median(r['back'] for r in rounds):.2f}",
            f"{median(r['missed'] for r in rounds):.0f}",
            f"{sum(r['twice'] for r in rounds):.0f} (sum)",
            f"{median(r['lines'] for r in rounds):.0f}",
            "",
        ]
    )
    table(
        [
            "round",
            "cut -> A lost (s)",
            "cut -> B runs it (s)",
            "heal -> A runs (s)",
            "slots missed",
            "slots twice",
            "A's WARNING/ERROR lines",
            "A's end line: skipped of due",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
