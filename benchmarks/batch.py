"""Many tasks due at one instant: one cronlease batch vs N raw single statements.

For N tasks due together (N = 1, 10, 100, 1000), each round takes a new
slot for all N tasks. cronlease: ``LeaseStore.acquire_many`` (one
statement on PostgreSQL) then ``finish_many`` for the winners, as a replica
does in a tick. Raw: the single-task acquire statement cronlease sends,
through the raw driver, N times (what a per-task design such as ShedLock
sends). Rounds alternate between the two. Reported per N: acquisition time
per task (median of per-round values, median over runs), its ratio to one
raw single statement at N = 1, and statements and database transactions per
tick (statements counted at the driver; transactions from pg_stat_database
of a database of its own; pg_stat_statements is used when preloaded).

    python benchmarks/batch.py [--backends postgresql] [--sizes 1,10,100,1000]
                               [--rounds 15] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    header,
    median,
    pg_commits,
    pg_has_statements,
    table,
    url_for,
    watch_statements,
    write_json,
)
from acquire import Replay

from cronlease._lease.database import create_store_engine
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease
from cronlease._lease.store import LeaseStore


def run_once(backend: str, url: str, sizes: list[int], rounds: int) -> dict[int, dict[str, float]]:
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    store = LeaseStore(engine)
    store.create_tables()
    statements = {"count": 0}

    def count(*_args: Any) -> None:
        statements["count"] += 1

    watching = contextlib.ExitStack()
    watching.enter_context(watch_statements(engine, count))
    out: dict[int, dict[str, float]] = {}
    base = int(time.time() * 1000) - 3_600_000
    for n in sizes:
        prefix = f"bench-batch-{secrets.token_hex(3)}"

        def requests(path: str, round_: int) -> list[AcquireRequest]:
            return [
                AcquireRequest(
                    name=f"{prefix}-{path}-{i:04d}",  # noqa: B023 (called within this iteration)
                    slot=base + round_,
                    ttl=0.001,
                    holder="bench",
                    tolerance=1.0,
                )
                for i in range(n)  # noqa: B023 (called within this iteration)
            ]

        replay = Replay(store, requests("r", 0)[0])
        with engine.connect() as conn:
            dbapi = conn.connection.dbapi_connection
        per_task: dict[str, list[float]] = {"cronlease": [], "raw": []}
        finish_per_task: list[float] = []
        stmts = xacts = 0.0
        won = 0
        for round_ in range(1, rounds + 1):
            time.sleep(0.002)  # the previous round's 1 ms leases have expired
            batch = requests("c", round_)
            raw = requests("r", round_)
            order = ("cronlease", "raw") if round_ % 2 else ("raw", "cronlease")
            for path in order:
                if path == "cronlease":
                    statements["count"] = 0
                    started = time.perf_counter()
                    results = store.acquire_many(batch)
                    acquired = time.perf_counter()
                    leases = [r for r in results if isinstance(r, Lease)]
                    store.finish_many(
                        [FinishRequest.of(lease, "succeeded", None) for lease in leases]
                    )
                    finished = time.perf_counter()
                    won += len(leases)
                    stmts += statements["count"]
                    per_task["cronlease"].append((acquired - started) / n * 1e6)
                    finish_per_task.append((finished - acquired) / n * 1e6)
                else:
                    started = time.perf_counter()
                    for request in raw:
                        replay.run(
                            dbapi,
                            {
                                "b_name": request.name,
                                "b_slot": request.slot,
                                "b_run_slot": request.slot,
                                "b_scheduled_for": request.slot / 1000.0,
                                "b_holder": f"bench#{secrets.token_hex(8)}",
                            },
                        )
                    per_task["raw"].append((time.perf_counter() - started) / n * 1e6)
        if backend == "postgresql":
            # Transactions, counted apart from the timing: a backend's counters reach
            # pg_stat_database when it closes, so each counted tick gets its own connection.
            counted = 3
            engine.dispose()
            before = pg_commits(url)
            with engine.connect():
                pass  # what connecting and counting cost by themselves
            engine.dispose()
            baseline = pg_commits(url) - before
            for round_ in range(rounds + 1, rounds + 1 + counted):
                time.sleep(0.002)
                engine.dispose()
                commits = pg_commits(url)
                results = store.acquire_many(requests("c", round_))
                store.finish_many(
                    [
                        FinishRequest.of(r, "succeeded", None)
                        for r in results
                        if isinstance(r, Lease)
                    ]
                )
                engine.dispose()
                xacts += pg_commits(url) - commits - baseline
            xacts = xacts * rounds / counted
        out[n] = {
            "cronlease_us": median(per_task["cronlease"]),
            "raw_us": median(per_task["raw"]),
            "finish_us": median(finish_per_task),
            "statements": stmts / rounds,
            "transactions": xacts / rounds if backend == "postgresql" else float("nan"),
            "won": won / rounds / n,
        }
    watching.close()
    store.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgresql")
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    header("batch: N tasks due together — one cronlease batch vs N raw single statements")
    rows = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            url = url_for(backend, Path(tmp))
            if backend == "postgresql":
                print(
                    f"pg_stat_statements preloaded: {pg_has_statements(url)} "
                    "(statements are counted at the driver)"
                )
            runs = [run_once(backend, url, sizes, args.rounds) for _ in range(args.runs)]
            single_raw = median(r[min(sizes)]["raw_us"] for r in runs)
            for n in sizes:
                med = {key: median(r[n][key] for r in runs) for key in runs[0][n]}
                ratio = med["cronlease_us"] / single_raw
                rows.append(
                    [
                        backend,
                        n,
                        med["cronlease_us"],
                        med["raw_us"],
                        f"{ratio:.3f}x",
                        med["finish_us"],
                        med["statements"],
                        med["transactions"],
                        f"{med['won']:.0%}",
                    ]
                )
                figures[f"{backend}.n{n}.cronlease_us_per_task"] = med["cronlease_us"]
                figures[f"{backend}.n{n}.ratio_to_raw_single"] = ratio
                figures[f"{backend}.n{n}.transactions_per_tick"] = med["transactions"]
    table(
        [
            "backend",
            "N",
            "acquire us/task",
            "raw us/task",
            "vs 1 raw stmt",
            "finish us/task",
            "statements/tick",
            "transactions/tick",
            "won",
        ],
        rows,
    )
    print(
        f"medians of {args.runs} runs x {args.rounds} rounds; "
        "a tick = one batch acquire + one finish_many; "
        "'vs 1 raw stmt' = cronlease acquire time per task / one raw single statement (N = 1)"
    )
    write_json(args.json, "batch", figures)


if __name__ == "__main__":
    main()
