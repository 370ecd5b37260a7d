"""History pruning: one unbounded DELETE (before issue 11) vs bounded batches (after).

N finished runs of T tasks, all older than the retention, pruned once each
way; meanwhile a writer thread acquires and finishes another task's lease in a
loop, as a replica's tick path would. Reported: rows pruned per second, the
longest single DELETE (how long it held its locks), and the writer's worst
acquire + finish latency during the prune (on SQLite every writer waits for
a whole DELETE; on PostgreSQL/MariaDB row locks only touch the pruned rows, but
one statement's undo and WAL still grow with it).

    python benchmarks/prune.py [--backend sqlite] [--rows 200000] [--tasks 100] [--runs 1]

MySQL/MariaDB runs in a database of its own (``cronlease_bench_prune``), dropped afterwards.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import MYSQL_URL, header, median, table, url_for, write_json
from sqlalchemy import bindparam, create_engine, delete, event, text
from sqlalchemy.engine import make_url

MYSQL_DATABASE = "cronlease_bench_prune"
AGE = 3600.0


def bench_url(backend: str, tmp: Path) -> str:
    if backend != "mysql":
        return url_for(backend, tmp)
    admin = create_engine(MYSQL_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE IF NOT EXISTS {MYSQL_DATABASE}"))
    admin.dispose()
    return make_url(MYSQL_URL).set(database=MYSQL_DATABASE).render_as_string(hide_password=False)


def drop_mysql() -> None:
    admin = create_engine(MYSQL_URL)
    with admin.begin() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {MYSQL_DATABASE}"))
    admin.dispose()


def fill(store: Any, rows: int, tasks: int) -> list[str]:
    from cronlease._lease.schema import leases, runs

    names = [f"prune-{index:04d}" for index in range(tasks)]
    with store.engine.begin() as conn:
        conn.execute(delete(runs))
        conn.execute(delete(leases))
    now = store.database_time()
    per_task = rows // tasks
    for name in names:
        batch = [
            {
                "name": name,
                "slot": slot,
                "manual": False,
                "fence": slot,
                "holder": "bench#0",
                "scheduled_for": now - AGE - slot,
                "started_at": now - AGE - slot,
                "finished_at": now - AGE - slot + 0.1,
                "outcome": "succeeded",
                "error": None,
            }
            for slot in range(1, per_task + 1)
        ]
        with store.engine.begin() as conn:
            conn.execute(runs.insert(), batch)
    return names


def unbounded(store: Any, names: list[str]) -> int:
    """The statement issue 11 replaced, as it was."""
    from cronlease._lease.schema import runs

    statement = delete(runs).where(
        runs.c.name.in_(bindparam("b_names", expanding=True)),
        runs.c.started_at < store.statements.now - AGE / 2,
        runs.c.outcome != "running",
    )
    with store.engine.begin() as conn:
        return int(conn.execute(statement, {"b_names": names}).rowcount)


def batched(store: Any, names: list[str]) -> int:
    from cronlease._run.housekeeping.pruning import prune_history

    return prune_history(store, names, AGE / 2, None).removed


class Writer(threading.Thread):
    """A tick path beside the prune: acquire + finish one lease, again and again."""

    def __init__(self, store: Any) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.stop = threading.Event()
        self.measuring = threading.Event()  # set while the prune runs
        self.worst = 0.0
        self.ready = threading.Event()

    def run(self) -> None:
        from cronlease._lease.model import AcquireRequest, Lease

        slot = int(time.time() * 1000)
        while not self.stop.is_set():
            slot += 1
            started = time.perf_counter()
            result = self.store.acquire(
                AcquireRequest(name="prune-writer", slot=slot, ttl=5, holder="w", tolerance=1e9)
            )
            if isinstance(result, Lease):
                self.store.finish(result, "succeeded")
            if self.measuring.is_set():
                self.worst = max(self.worst, time.perf_counter() - started)
            self.ready.set()
            self.stop.wait(0.01)


def measure(store: Any, names: list[str], prune: Any) -> dict[str, float]:
    longest = [0.0]
    began: dict[int, float] = {}

    def before(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            began[id(cursor)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        start = began.pop(id(cursor), None)
        if start is not None:
            longest[0] = max(longest[0], time.perf_counter() - start)

    event.listen(store.engine, "before_cursor_execute", before)
    event.listen(store.engine, "after_cursor_execute", after)
    writer = Writer(store)
    writer.start()
    writer.ready.wait()  # its statements compiled, its lease row made
    writer.measuring.set()
    started = time.perf_counter()
    removed = prune(store, names)
    elapsed = time.perf_counter() - started
    writer.measuring.clear()
    writer.stop.set()
    writer.join()
    event.remove(store.engine, "before_cursor_execute", before)
    event.remove(store.engine, "after_cursor_execute", after)
    return {
        "rows": removed,
        "rows_per_s": removed / elapsed,
        "longest_delete_ms": longest[0] * 1000,
        "writer_worst_ms": writer.worst * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql", "mysql"])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    from cronlease import LeaseStore

    header(f"pruning {args.rows} runs of {args.tasks} tasks on {args.backend}")
    with tempfile.TemporaryDirectory() as tmp:
        store = LeaseStore.from_url(bench_url(args.backend, Path(tmp)))
        try:
            store.create_tables()
            results: dict[str, list[dict[str, float]]] = {"unbounded": [], "batched": []}
            for _ in range(args.runs):
                for way, prune in (("unbounded", unbounded), ("batched", batched)):
                    names = fill(store, args.rows, args.tasks)
                    results[way].append(measure(store, names, prune))
            rows = []
            figures: dict[str, float] = {}
            for way, samples in results.items():
                row = {key: median(sample[key] for sample in samples) for key in samples[0]}
                rows.append([way, *row.values()])
                figures.update({f"{args.backend}_{way}_{key}": value for key, value in row.items()})
            table(["way", "rows", "rows/s", "longest DELETE ms", "writer worst ms"], rows)
            write_json(args.json, "prune", figures)
        finally:
            store.dispose()
            if args.backend == "mysql":
                drop_mysql()


if __name__ == "__main__":
    main()
