"""What never preparing costs on PostgreSQL: cronlease's default against psycopg's.

cronlease's engines pass psycopg ``prepare_threshold=None`` (no server-side
prepared statements, so PgBouncer's transaction pooling works: docs/design.md
§3.10). Connected to PostgreSQL directly, a user may ask for psycopg's default
(``?prepare_threshold=5``). This measures both on one local server, two stores
of one connection each, alternating run by run: ``acquire_many`` of a batch of
1 and of 200 tasks, ``lost`` (the slot is taken: what every replica but one
sends each tick) and ``won`` (with the ``finish_many`` that frees it again).
Reported: p50 in microseconds, medians over ``--runs`` runs, and the ratio.

    python benchmarks/prepared.py [--runs 5] [--repeats 300]
"""

from __future__ import annotations

import argparse
import time
import uuid

from _common import header, median, table, url_for, write_json

from cronlease._lease.database import create_store_engine
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease
from cronlease._lease.store import LeaseStore

THRESHOLDS = {"never (default)": None, "after 5": 5}


def one_run(store: LeaseStore, size: int, repeats: int, base: int) -> dict[str, float]:
    names = [f"bench-{uuid.uuid4().hex[:8]}-{i}" for i in range(size)]
    first = [AcquireRequest(name=n, slot=base, ttl=600, holder="h") for n in names]
    leases = [lease for lease in store.acquire_many(first) if isinstance(lease, Lease)]
    times: dict[str, list[float]] = {"lost": [], "won": [], "finish": []}
    for repeat in range(repeats):
        start = time.perf_counter()
        store.acquire_many(first)
        times["lost"].append(time.perf_counter() - start)
        finishes = [FinishRequest.of(lease, "succeeded", None) for lease in leases]
        start = time.perf_counter()
        store.finish_many(finishes)
        times["finish"].append(time.perf_counter() - start)
        slot = base + (repeat + 1) * 1000
        again = [AcquireRequest(name=n, slot=slot, ttl=600, holder="h") for n in names]
        start = time.perf_counter()
        results = store.acquire_many(again)
        times["won"].append(time.perf_counter() - start)
        leases = [lease for lease in results if isinstance(lease, Lease)]
        assert len(leases) == size
    return {case: median(values) * 1e6 for case, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--repeats", type=int, default=300, help="per run, batch of 1 (÷10 for 200)"
    )
    parser.add_argument("--json", help="add the figures to this JSON file (for compare.py)")
    args = parser.parse_args()
    header("prepared: PostgreSQL, never preparing vs psycopg's prepare_threshold=5 (p50, µs)")
    url = url_for("postgresql")
    stores = {
        label: LeaseStore(
            create_store_engine(
                url, pool_size=1, max_overflow=0, connect_args={"prepare_threshold": value}
            )
        )
        for label, value in THRESHOLDS.items()
    }
    try:
        next(iter(stores.values())).create_tables()
        base = int(next(iter(stores.values())).database_time() * 1000) - 86_400_000
        rows, figures = [], {}
        for size in (1, 200):
            repeats = args.repeats if size == 1 else max(3, args.repeats // 10)
            runs: dict[str, list[dict[str, float]]] = {label: [] for label in stores}
            for _ in range(args.runs):
                for label, store in stores.items():
                    runs[label].append(one_run(store, size, repeats, base))
            for case in ("lost", "won", "finish"):
                never, five = (median(r[case] for r in runs[label]) for label in stores)
                rows.append([size, case, never, five, f"{never / five:.2f}x"])
                figures[f"batch{size}.{case}.never_p50_us"] = never
                figures[f"batch{size}.{case}.after5_p50_us"] = five
        table(["batch", "case", *stores, "never / after 5"], rows)
        write_json(args.json, "prepared", figures)
    finally:
        for store in stores.values():
            store.dispose()


if __name__ == "__main__":
    main()
