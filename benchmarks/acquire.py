"""Single acquisition: cronlease's acquire path vs the identical SQL through the raw driver.

For each backend, one cronlease ``LeaseStore.acquire`` (the batch of one) and one replay of
exactly the statements it sent (captured where they reach the driver,
with the same parameters but this attempt's slot and nonce) through the raw
DB-API connection (psycopg, sqlite3, PyMySQL) — the same connection, the
only one in the pool — alternate, so both see the same machine noise.
Two cases: ``lost`` (the slot is taken: the common case on a fleet, one
statement on PostgreSQL) and ``won`` (the lease is free: the run row is
written too). Reported: mean, p50 and p99 in microseconds, medians over
``--runs`` runs, and the ratio cronlease / raw of the p50 and the mean.

    python benchmarks/acquire.py [--backends postgresql,sqlite,mysql] [--iterations 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import header, median, summary, table, url_for, watch_statements, write_json
from sqlalchemy import event

from cronlease._lease.database import create_store_engine
from cronlease._lease.dialects.base import acquire_rows
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore

Step = tuple[str, Any, "tuple[str, ...] | None"]  # statement, parameters, positional names

NAMES = 64  # the "won" case cycles through this many tasks, so each lease has expired again


class Replay:
    """The driver-level statements of one cronlease acquisition, replayable with new values."""

    def __init__(self, store: LeaseStore, request: AcquireRequest) -> None:
        self.steps: list[Step | None] = []  # None: a commit
        engine = store.engine

        def on_statement(statement: str, parameters: Any, names: tuple[str, ...] | None) -> None:
            self.steps.append((statement, parameters, names))

        def on_commit(conn: Any) -> None:
            self.steps.append(None)

        event.listen(engine, "commit", on_commit)
        try:
            with watch_statements(engine, on_statement):
                store.acquire(request)
        finally:
            event.remove(engine, "commit", on_commit)

    def run(self, dbapi: Any, values: dict[str, Any]) -> None:
        for step in self.steps:
            if step is None:
                dbapi.commit()
                continue
            statement, parameters, names = step
            cursor = dbapi.cursor()
            if names is not None:
                params: Any = tuple(
                    values.get(name, value) for name, value in zip(names, parameters, strict=True)
                )
            elif isinstance(parameters, dict):
                params = {key: values.get(key, value) for key, value in parameters.items()}
            elif isinstance(parameters, list) and parameters and isinstance(parameters[0], dict):
                # an executemany (SQLite's sweep and run rows)
                cursor.executemany(
                    statement,
                    [{key: values.get(key, value) for key, value in p.items()} for p in parameters],
                )
                cursor.close()
                continue
            else:
                params = parameters
            cursor.execute(statement, params)
            if cursor.description is not None:
                cursor.fetchall()
            cursor.close()


def bench_backend(
    backend: str, iterations: int, run: int, tmp: Path
) -> dict[str, dict[str, dict[str, float]]]:
    url = url_for(backend, tmp)
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    store = LeaseStore(engine)
    store.create_tables()
    prefix = f"bench-acq-{secrets.token_hex(3)}-{run}"
    base_slot = int(time.time() * 1000) - 3_600_000
    results: dict[str, dict[str, dict[str, float]]] = {}
    for case in ("lost", "won"):

        def request(path: str, i: int) -> AcquireRequest:
            if case == "lost":  # noqa: B023 (called within this iteration)
                return AcquireRequest(
                    name=f"{prefix}-{path}-lost",
                    slot=base_slot,
                    ttl=60.0,
                    holder="bench",
                    tolerance=1.0,
                )
            return AcquireRequest(
                name=f"{prefix}-{path}-{i % NAMES}",
                slot=base_slot + 1 + i,
                ttl=0.001,
                holder="bench",
                tolerance=1.0,
            )

        # the lease the "lost" case keeps losing to; the first "won" rows
        for path in ("c", "r"):
            store.acquire(request(path, 0))
        replay = Replay(store, request("r", 1))
        with engine.connect() as conn:
            dbapi = conn.connection.dbapi_connection  # the pool's only connection
        assert dbapi is not None
        timings: dict[str, list[float]] = {"cronlease": [], "raw": []}
        wins = {"cronlease": 0, "raw": 0}

        def cronlease_once(i: int) -> None:
            if isinstance(store.acquire(request("c", i)), Lease):
                wins["cronlease"] += 1  # noqa: B023 (called within this iteration)

        def raw_once(i: int) -> None:
            r = request("r", i)
            nonce = f"{r.holder}#{secrets.token_hex(8)}"
            batch = json.dumps(acquire_rows([r], [nonce]))
            replay.run(  # noqa: B023 (called within this iteration)
                dbapi,  # noqa: B023 (called within this iteration)
                {
                    # PostgreSQL's arrays, SQLite's and MySQL's JSON rows
                    "b_names": json.dumps([r.name]) if backend == "sqlite" else [r.name],
                    "b_holders": [nonce],
                    "b_slots": [r.slot],
                    "b_run_slots": [r.slot],
                    "b_batch": batch,
                    # a batch of one's scalars; SQLite's per-winner sweep and run row
                    "b_name": r.name,
                    "b_slot": r.slot,
                    "b_run_slot": r.slot,
                    "b_scheduled_for": r.slot / 1000.0,
                    "b_holder": nonce,
                },
            )

        paths: list[tuple[str, Callable[[int], None]]] = [
            ("cronlease", cronlease_once),
            ("raw", raw_once),
        ]
        warmup = 200
        for i in range(2, iterations + warmup):
            for name, once in paths if i % 2 else reversed(paths):
                started = time.perf_counter_ns()
                once(i)
                elapsed = (time.perf_counter_ns() - started) / 1000.0
                if i >= warmup:
                    timings[name].append(elapsed)
        if case == "won" and wins["cronlease"] < len(timings["cronlease"]):
            print(f"  note: {backend} won only {wins['cronlease']} of {len(timings['cronlease'])}")
        results[case] = {name: summary(samples) for name, samples in timings.items()}
    store.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgresql,sqlite,mysql")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="add the figures to this JSON file (for compare.py)")
    args = parser.parse_args()
    header("acquire: cronlease LeaseStore.acquire vs the same SQL on the raw driver (microseconds)")
    rows = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            runs = [
                bench_backend(backend, args.iterations, run, Path(tmp)) for run in range(args.runs)
            ]
            for case in ("lost", "won"):
                med = {
                    path: {
                        stat: median(r[case][path][stat] for r in runs)
                        for stat in ("mean", "p50", "p99")
                    }
                    for path in ("cronlease", "raw")
                }
                ratio_p50 = median(
                    r[case]["cronlease"]["p50"] / r[case]["raw"]["p50"] for r in runs
                )
                ratio_mean = median(
                    r[case]["cronlease"]["mean"] / r[case]["raw"]["mean"] for r in runs
                )
                rows.append(
                    [
                        backend,
                        case,
                        med["cronlease"]["mean"],
                        med["cronlease"]["p50"],
                        med["cronlease"]["p99"],
                        med["raw"]["mean"],
                        med["raw"]["p50"],
                        med["raw"]["p99"],
                        f"{ratio_p50:.2f}x",
                        f"{ratio_mean:.2f}x",
                    ]
                )
                figures[f"{backend}.{case}.cronlease_p50_us"] = med["cronlease"]["p50"]
                figures[f"{backend}.{case}.raw_p50_us"] = med["raw"]["p50"]
                figures[f"{backend}.{case}.ratio_p50"] = ratio_p50
    table(
        [
            "backend",
            "case",
            "cronlease mean",
            "p50",
            "p99",
            "raw mean",
            "p50",
            "p99",
            "ratio p50",
            "ratio mean",
        ],
        rows,
    )
    print(
        f"medians of {args.runs} runs x {args.iterations} alternating iterations "
        "(after 200 warm-up)"
    )
    write_json(args.json, "acquire", figures)


if __name__ == "__main__":
    main()
