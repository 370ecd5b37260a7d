"""Capacity: R replica processes x T tasks every P seconds that take S seconds, for D seconds.

The shape of issue 11 item 1 (two replicas, 16 workers each, 20 tasks every
2 s taking 1.5 s): no replica can run every task, the fleet can. Each replica
is tests/support/capacity_replica.py; every run is counted at the
side-effect ledger. Reported, over the slots after a warm-up: missed slots
(a task's slot with no run), duplicates, runs recorded ``lost``, runs that
began past their grace, the latest start, and each replica's skips by
reason (``capacity`` among them).

    python benchmarks/capacity.py [--backend sqlite] [--replicas 2] [--tasks 20] \
        [--every 2] [--seconds 1.5] [--workers 16] [--duration 30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from _common import header, url_for
from sqlalchemy import select

from cronlease import Scheduler
from tests.support import ledger
from tests.support.procs import Proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql", "mysql"])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    args = parser.parse_args()
    header("capacity: replicas short of workers, the fleet not")
    with tempfile.TemporaryDirectory() as tmp:
        run(url_for(args.backend, Path(tmp)), args)


def run(url: str, args: argparse.Namespace) -> None:
    ledger.setup(url)
    prefix = f"cap-{uuid.uuid4().hex[:8]}"
    command = [prefix, str(args.tasks), f"{args.every}s", str(args.seconds), str(args.workers)]
    replicas = [
        Proc("-m", "tests.support.capacity_replica", url, *command) for _ in range(args.replicas)
    ]
    try:
        for replica in replicas:
            replica.expect("started", timeout=120)
        step = args.every * 1000
        first = (int((time.time() + args.warmup) * 1000) // step + 1) * step
        last = first + int(args.duration * 1000) // step * step
        while time.time() * 1000 < last + step:
            time.sleep(0.2)
    finally:
        for replica in replicas:
            replica.terminate()
    stats = [replica.expect("stats", timeout=30).split()[1:] for replica in replicas]
    table = ledger.ledger
    with ledger._engine(url).connect() as conn:
        rows = conn.execute(
            select(table.c.task, table.c.slot).where(table.c.task.like(f"{prefix}-%"))
        ).all()
    slots: dict[str, Counter[int]] = defaultdict(Counter)
    for task, slot in rows:
        slots[str(task)][int(slot)] += 1
    window = range(first, last + 1, step)
    names = [f"{prefix}-{i:03d}" for i in range(args.tasks)]
    missed = sum(1 for name in names for slot in window if slots[name][slot] == 0)
    twice = sum(1 for name in names for slot in window if slots[name][slot] > 1)
    store = Scheduler(url, history_retention=None).store
    outcomes = Counter(
        run.outcome for runs in store.recent_runs(names, limit=1000).values() for run in runs
    )
    store.engine.dispose()
    print(f"url: {url}  shape: {vars(args)}")
    print(f"slots watched: {len(window)} x {args.tasks} tasks = {len(window) * args.tasks}")
    print(f"missed slots: {missed}   slots run twice: {twice}")
    print(f"recorded outcomes (whole run): {dict(outcomes)}")
    for index, figures in enumerate(stats):
        print(f"replica {index}: {' '.join(figures)}")


if __name__ == "__main__":
    main()
