"""The limit: the fewest statements a tick can take, against what cronlease takes.

For N tasks due at one instant (N = 1, 10, 100, 1000), each round takes a new
slot for all N tasks and finishes them, two ways, alternating:

- cronlease: ``LeaseStore.acquire_many`` then ``finish_many`` of the winners,
  the store calls of one batched tick (as batch.py);
- raw: a script on the bare driver (psycopg 3, PyMySQL, sqlite3) sending only
  the two statements of the lease protocol, each in autocommit: one multi-row
  upsert that takes the due leases with cronlease's guard (future gate on the
  inserting SELECT; expired, not paused, slot cursor older; fence + 1, the
  attempt's nonce as holder; MariaDB's first-assignment CASE rule) and one
  multi-row release fenced by fence and nonce. No run history, no abandoned-run
  sweep, no refusal explained: what those cost is the difference.

Reported per backend and N, for each way: driver calls per tick (statements
handed to the driver: a MariaDB script is one, an ``executemany`` one),
executions per tick (SQL statements the server runs: a script's statements,
``executemany``'s rows, SQLite's COMMITs), round trips per tick (requests on the
wire through a counting proxy; SQLite: library calls), transactions per tick
(PostgreSQL: ``pg_stat_database.xact_commit``; MariaDB: the session's
``Com_commit`` + ``Com_rollback``; SQLite: BEGINs; raw: each autocommit statement) and µs per
task for the whole tick (median of per-round values, median over runs), the
ratio cronlease / raw, and the client's own CPU µs per task (this thread's CPU
time: the library and driver, not the server's work nor waiting for it). Each
backend uses a database of its own (PostgreSQL and MariaDB:
``cronlease_limit_<pid>``, dropped at the end; SQLite: a temp file). The raw
driver never prepares on PostgreSQL (cronlease's default).

    python benchmarks/limit.py [--backends postgresql,mysql,sqlite] [--sizes 1,10,100,1000]
                               [--rounds 15] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import (
    MYSQL_URL,
    POSTGRES_ADMIN_URL,
    header,
    median,
    pg_commits,
    table,
    write_json,
)
from roundtrips import CountingProxy
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, make_url

from cronlease._lease.database import create_store_engine
from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease
from cronlease._lease.store import LeaseStore

DATABASE = f"cronlease_limit_{os.getpid()}"
TTL = 60.0  # every tick releases its leases; the next round's slot is newer

# --- the raw protocol, per backend -------------------------------------------------

PG_NOW = "(EXTRACT(EPOCH FROM statement_timestamp())::float8)"
PG_ACQUIRE = """
INSERT INTO cronlease_leases AS l (name, holder, fence, slot, acquired_at, expires_at, paused)
SELECT b.name, b.holder, 1, b.slot, {now}, {now} + b.ttl, false
  FROM {rows}
 WHERE b.slot::float8 / 1000.0 <= {now} + b.tolerance
 ORDER BY b.name
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, fence = l.fence + 1, slot = excluded.slot,
       acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
 WHERE l.expires_at < {now} AND NOT l.paused AND l.slot < excluded.slot
RETURNING l.name, l.fence, l.holder
"""
PG_ACQUIRE_ROWS = {
    True: "(SELECT %(name)s::text AS name, %(holder)s::text AS holder, %(slot)s::bigint AS slot,"
    " %(ttl)s::float8 AS ttl, %(tolerance)s::float8 AS tolerance) AS b",
    False: "unnest(%(name)s::text[], %(holder)s::text[], %(slot)s::bigint[], %(ttl)s::float8[],"
    " %(tolerance)s::float8[]) AS b(name, holder, slot, ttl, tolerance)",
}
PG_FINISH = {
    True: f"UPDATE cronlease_leases SET expires_at = {PG_NOW} - 0.001"
    " WHERE name = %(name)s AND fence = %(fence)s AND holder = %(holder)s",
    False: f"UPDATE cronlease_leases l SET expires_at = {PG_NOW} - 0.001"
    " FROM unnest(%(name)s::text[], %(fence)s::bigint[], %(holder)s::text[])"
    " AS b(name, fence, holder)"
    " WHERE l.name = b.name AND l.fence = b.fence AND l.holder = b.holder",
}

MY_NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
MY_BIN = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
MY_OURS = "cronlease_leases.holder = VALUES(holder)"


def _my_if_ours(column: str) -> str:
    return (
        f"{column} = CASE WHEN {MY_OURS} THEN VALUES({column}) ELSE cronlease_leases.{column} END"
    )


MY_ACQUIRE = f"""
INSERT INTO cronlease_leases (name, holder, fence, slot, acquired_at, expires_at, paused)
SELECT {{name}}, {{holder}}, 1, {{slot}}, {MY_NOW}, {MY_NOW} + {{ttl}}, false
  FROM {{source}}
 WHERE {{slot}} / 1000.0 <= {MY_NOW} + {{tolerance}}{{order}}
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN cronlease_leases.expires_at < {MY_NOW} AND NOT cronlease_leases.paused
                       AND cronlease_leases.slot < VALUES(slot)
                  THEN VALUES(holder) ELSE cronlease_leases.holder END,
    fence = CASE WHEN {MY_OURS} THEN cronlease_leases.fence + 1 ELSE cronlease_leases.fence END,
    {_my_if_ours("slot")}, {_my_if_ours("acquired_at")}, {_my_if_ours("expires_at")}
RETURNING name, fence, holder
"""
MY_ACQUIRE_ONE = MY_ACQUIRE.format(
    name="%(name)s",
    holder="%(holder)s",
    slot="%(slot)s",
    ttl="%(ttl)s",
    tolerance="%(tolerance)s",
    source="DUAL",
    order="",
)
MY_ACQUIRE_MANY = MY_ACQUIRE.format(
    name="b.name",
    holder="b.holder",
    slot="b.slot",
    ttl="b.ttl",
    tolerance="b.tolerance",
    source="JSON_TABLE(%(batch)s, '$[*]' COLUMNS ("
    f"name {MY_BIN} PATH '$.name', holder {MY_BIN} PATH '$.holder', slot BIGINT PATH '$.slot',"
    " ttl DOUBLE PATH '$.ttl', tolerance DOUBLE PATH '$.tolerance')) AS b",
    order="\n ORDER BY b.name",
)
MY_FINISH = {
    True: f"UPDATE cronlease_leases SET expires_at = {MY_NOW} - 0.001"
    " WHERE name = %(name)s AND fence = %(fence)s AND holder = %(holder)s",
    False: "UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS ("
    f"name {MY_BIN} PATH '$.name', fence BIGINT PATH '$.fence', holder {MY_BIN} PATH '$.holder'"
    ")) AS b STRAIGHT_JOIN cronlease_leases l ON l.name = b.name"
    f" SET l.expires_at = {MY_NOW} - 0.001 WHERE l.fence = b.fence AND l.holder = b.holder",
}

LITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"


def _lite_acquire(one: bool) -> str:
    def field(name: str) -> str:
        return f":{name}" if one else f"json_extract(value, '$.{name}')"

    source, order = ("", "") if one else ("\n  FROM json_each(:batch)", "\n ORDER BY 1")
    return f"""
INSERT INTO cronlease_leases AS l (name, holder, fence, slot, acquired_at, expires_at, paused)
SELECT {field("name")}, {field("holder")}, 1, {field("slot")}, {LITE_NOW},
       {LITE_NOW} + {field("ttl")}, 0{source}
 WHERE {field("slot")} / 1000.0 <= {LITE_NOW} + {field("tolerance")}{order}
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, fence = l.fence + 1, slot = excluded.slot,
       acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
 WHERE l.expires_at < {LITE_NOW} AND NOT l.paused AND l.slot < excluded.slot
RETURNING name, fence, holder
"""


LITE_ACQUIRE = {one: _lite_acquire(one) for one in (True, False)}
LITE_FINISH = {
    True: f"UPDATE cronlease_leases SET expires_at = {LITE_NOW} - 0.001"
    " WHERE name = :name AND fence = :fence AND holder = :holder",
    False: f"UPDATE cronlease_leases SET expires_at = {LITE_NOW} - 0.001 FROM (SELECT"
    " json_extract(value, '$.name') AS name, json_extract(value, '$.fence') AS fence,"
    " json_extract(value, '$.holder') AS holder FROM json_each(:batch)) AS b"
    " WHERE cronlease_leases.name = b.name AND cronlease_leases.fence = b.fence"
    " AND cronlease_leases.holder = b.holder",
}


class Raw:
    """The two statements of the protocol on a bare DB-API connection, in autocommit."""

    def __init__(self, backend: str, url: URL) -> None:
        self.backend = backend
        self.url = url
        self.calls = 0
        self.connect()

    def connect(self) -> None:
        url = self.url
        if self.backend == "postgresql":
            import psycopg

            self.conn: Any = psycopg.connect(
                host=url.host,
                port=url.port,
                user=url.username,
                dbname=url.database,
                autocommit=True,
                prepare_threshold=None,
            )
        elif self.backend == "mysql":
            import pymysql

            self.conn = pymysql.connect(
                host=url.host,
                port=url.port or 3306,
                user=url.username,
                password=url.password or "",
                database=url.database,
                autocommit=True,
                init_command="SET time_zone = '+00:00'",
            )
        else:
            self.conn = sqlite3.connect(str(url.database), isolation_level=None)
            self.conn.execute("PRAGMA busy_timeout = 30000")
            self.conn.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        self.conn.close()

    def _run(self, sql: str, params: Any) -> list[Any]:
        self.calls += 1
        cursor = self.conn.cursor()
        cursor.execute(sql, params)
        rows = list(cursor.fetchall()) if cursor.description is not None else []
        cursor.close()
        return rows

    def tick(self, names: list[str], slot: int, holder: str) -> int:
        """Acquire every name for ``slot``, then release the leases won; how many won."""
        one = len(names) == 1
        nonces = [f"{holder}#{secrets.token_hex(8)}" for _ in names]
        rows = [
            {"name": name, "holder": nonce, "slot": slot, "ttl": TTL, "tolerance": 1.0}
            for name, nonce in zip(names, nonces, strict=True)
        ]
        if self.backend == "postgresql":
            params = rows[0] if one else {key: [row[key] for row in rows] for key in rows[0]}
            sql = PG_ACQUIRE.format(now=PG_NOW, rows=PG_ACQUIRE_ROWS[one])
        elif self.backend == "mysql":
            params = rows[0] if one else {"batch": json.dumps(rows)}
            sql = MY_ACQUIRE_ONE if one else MY_ACQUIRE_MANY
        else:
            params = rows[0] if one else {"batch": json.dumps(rows)}
            sql = LITE_ACQUIRE[one]
        mine = dict(zip(names, nonces, strict=True))
        won = [
            {"name": name, "fence": int(fence), "holder": got}
            for name, fence, got in self._run(sql, params)
            if mine.get(name) == got  # MariaDB returns every row the upsert touched
        ]
        if not won:
            return 0
        one = len(won) == 1
        if self.backend == "postgresql":
            params = won[0] if one else {key: [row[key] for row in won] for key in won[0]}
            self._run(PG_FINISH[one], params)
        elif self.backend == "mysql":
            self._run(MY_FINISH[one], won[0] if one else {"batch": json.dumps(won)})
        else:
            self._run(LITE_FINISH[one], won[0] if one else {"batch": json.dumps(won)})
        return len(won)


# --- counting cronlease ----------------------------------------------------------


class Counts:
    """Driver calls, executions, commits and BEGINs cronlease sends on one engine."""

    def __init__(self) -> None:
        self.calls = self.executions = self.commits = self.begins = 0

    def reset(self) -> None:
        self.calls = self.executions = self.commits = self.begins = 0


@contextlib.contextmanager
def counting(engine: Any, counts: Counts) -> Iterator[None]:
    def on_execute(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        counts.calls += 1
        if many:
            counts.executions += len(parameters)
        elif statement.lstrip().startswith("START TRANSACTION;"):  # a MariaDB script
            counts.executions += statement.count(";\n") + 1
        else:
            counts.executions += 1
        if statement.lstrip().upper().startswith("BEGIN"):
            counts.begins += 1

    def on_commit(conn: Any) -> None:
        counts.commits += 1

    original = DriverStatement.execute

    def driver_execute(self: DriverStatement, conn: Any, params: Any) -> Any:
        counts.calls += 1
        counts.executions += 1
        return original(self, conn, params)

    event.listen(engine, "before_cursor_execute", on_execute)
    event.listen(engine, "commit", on_commit)
    DriverStatement.execute = driver_execute  # type: ignore[method-assign]
    try:
        yield
    finally:
        DriverStatement.execute = original  # type: ignore[method-assign]
        event.remove(engine, "commit", on_commit)
        event.remove(engine, "before_cursor_execute", on_execute)


def cronlease_tick(store: LeaseStore, requests: list[AcquireRequest]) -> int:
    results = store.acquire_many(requests)
    leases = [r for r in results if isinstance(r, Lease)]
    store.finish_many([FinishRequest.of(lease, "succeeded", None) for lease in leases])
    return len(leases)


# --- a database of its own ---------------------------------------------------------


@contextlib.contextmanager
def own_database(backend: str, tmp: Path) -> Iterator[URL]:
    if backend == "sqlite":
        yield make_url(f"sqlite:///{tmp / 'limit.db'}")
        return
    admin_url = make_url(POSTGRES_ADMIN_URL if backend == "postgresql" else MYSQL_URL)
    options: dict[str, Any] = {"isolation_level": "AUTOCOMMIT"}
    admin = create_engine(admin_url, **options)
    with admin.connect() as conn:
        extra = " CHARACTER SET utf8mb4" if backend == "mysql" else ""
        conn.execute(text(f"CREATE DATABASE {DATABASE}{extra}"))
    try:
        yield admin_url.set(database=DATABASE)
    finally:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if backend == "postgresql" else ""
            conn.execute(text(f"DROP DATABASE IF EXISTS {DATABASE}{force}"))
        admin.dispose()


def my_commits(dbapi: Any) -> int:
    """The session's COMMITs and ROLLBACKs so far (its transactions, outside autocommit)."""
    cursor = dbapi.cursor()
    cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')")
    value = sum(int(row[1]) for row in cursor.fetchall())
    cursor.close()
    return value


# --- one run -----------------------------------------------------------------------

Figures = dict[str, float]


def run_once(backend: str, url: URL, sizes: list[int], rounds: int) -> dict[int, Figures]:
    engine = create_store_engine(url.render_as_string(hide_password=False), pool_size=1)
    store = LeaseStore(engine)
    store.create_tables()
    raw = Raw(backend, url)
    counts = Counts()
    out: dict[int, Figures] = {}
    base = int(time.time() * 1000) - 3_600_000
    with counting(engine, counts):
        for n in sizes:
            prefix = f"limit-{secrets.token_hex(3)}"
            c_names = [f"{prefix}-c-{i:04d}" for i in range(n)]
            r_names = [f"{prefix}-r-{i:04d}" for i in range(n)]

            def requests(slot: int) -> list[AcquireRequest]:
                return [
                    AcquireRequest(name=name, slot=slot, ttl=TTL, holder="bench", tolerance=1.0)
                    for name in c_names  # noqa: B023 (called within this iteration)
                ]

            us: dict[str, list[float]] = {"cronlease": [], "raw": []}
            cpu: dict[str, list[float]] = {"cronlease": [], "raw": []}
            calls: dict[str, list[int]] = {"cronlease": [], "raw": []}
            executions: list[int] = []
            won = {"cronlease": 0, "raw": 0}
            slot = base
            for round_ in range(rounds + 1):  # round 0 creates the rows: not counted
                slot += 1
                order = ("cronlease", "raw") if round_ % 2 else ("raw", "cronlease")
                for path in order:
                    if path == "cronlease":
                        batch = requests(slot)
                        counts.reset()
                        started, on_cpu = time.perf_counter(), time.thread_time()
                        got = cronlease_tick(store, batch)
                    else:
                        raw.calls = 0
                        started, on_cpu = time.perf_counter(), time.thread_time()
                        got = raw.tick(r_names, slot, "bench")
                    elapsed = time.perf_counter() - started
                    client = time.thread_time() - on_cpu
                    if round_ == 0:
                        continue
                    won[path] += got
                    us[path].append(elapsed / n * 1e6)
                    cpu[path].append(client / n * 1e6)
                    if path == "cronlease":
                        calls[path].append(counts.calls)
                        executions.append(counts.executions + counts.commits)
                    else:
                        calls[path].append(raw.calls)
            figures: Figures = {
                "cronlease_us": median(us["cronlease"]),
                "raw_us": median(us["raw"]),
                "cronlease_cpu": median(cpu["cronlease"]),
                "raw_cpu": median(cpu["raw"]),
                "cronlease_calls": median(calls["cronlease"]),
                "raw_calls": median(calls["raw"]),
                # SQLite's COMMIT is a library call; the others' are in their scripts
                "cronlease_executions": median(executions),
                "raw_executions": median(calls["raw"]),
                "cronlease_won": won["cronlease"] / rounds / n,
                "raw_won": won["raw"] / rounds / n,
            }
            slot += 1
            figures.update(
                transactions(backend, url, store, raw, counts, requests, r_names, slot, slot + 3)
            )
            if backend == "sqlite":
                counts.reset()
                cronlease_tick(store, requests(slot + 10))
                figures["cronlease_trips"] = counts.calls + counts.commits
                figures["raw_trips"] = 2
            out[n] = figures
            base = slot + 100
    raw.close()
    store.dispose()
    if backend != "sqlite":
        for n, (c_trips, r_trips) in round_trips(backend, url, sizes, base).items():
            out[n]["cronlease_trips"] = c_trips
            out[n]["raw_trips"] = r_trips
    return out


def transactions(
    backend: str,
    url: URL,
    store: LeaseStore,
    raw: Raw,
    counts: Counts,
    requests: Callable[[int], list[AcquireRequest]],
    r_names: list[str],
    first: int,
    last: int,
) -> Figures:
    """Transactions per tick, each way, averaged over the slots first..last-1."""
    ticks = last - first
    c_total = r_total = 0.0
    if backend == "postgresql":
        # A backend's counters reach pg_stat_database when it closes: each counted
        # tick gets a connection of its own, and what connecting costs is taken off.
        raw.close()
        store.engine.dispose()
        before = pg_commits(url.render_as_string(hide_password=False))
        with store.engine.connect():
            pass
        store.engine.dispose()
        c_baseline = pg_commits(url.render_as_string(hide_password=False)) - before
        raw.connect()
        raw.close()
        r_baseline = pg_commits(url.render_as_string(hide_password=False)) - before - c_baseline
        for slot in range(first, last):
            commits = pg_commits(url.render_as_string(hide_password=False))
            cronlease_tick(store, requests(slot))
            store.engine.dispose()
            c_total += pg_commits(url.render_as_string(hide_password=False)) - commits - c_baseline
            commits = pg_commits(url.render_as_string(hide_password=False))
            raw.connect()
            raw.tick(r_names, slot, "bench")
            raw.close()
            r_total += pg_commits(url.render_as_string(hide_password=False)) - commits - r_baseline
        raw.connect()
    elif backend == "mysql":
        # cronlease's sessions are not in autocommit: a transaction ends with a COMMIT
        # (a script's own) or a ROLLBACK; each of the raw script's autocommit
        # statements is a transaction of its own.
        for slot in range(first, last):
            with store.engine.connect() as conn:
                before = my_commits(conn.connection.dbapi_connection)
            cronlease_tick(store, requests(slot))
            with store.engine.connect() as conn:
                c_total += my_commits(conn.connection.dbapi_connection) - before
            raw.calls = 0
            raw.tick(r_names, slot, "bench")
            r_total += raw.calls
    else:
        for slot in range(first, last):
            counts.reset()
            cronlease_tick(store, requests(slot))
            c_total += counts.begins
            raw.calls = 0
            raw.tick(r_names, slot, "bench")
            r_total += raw.calls  # autocommit: each statement its own transaction
    return {"cronlease_xacts": c_total / ticks, "raw_xacts": r_total / ticks}


def round_trips(backend: str, url: URL, sizes: list[int], base: int) -> dict[int, tuple[int, int]]:
    """Requests on the wire for one tick each way, through a counting proxy."""
    proxy = CountingProxy(url.host or "127.0.0.1", url.port or 0)
    proxied = url.set(host="127.0.0.1", port=proxy.port)
    engine = create_store_engine(proxied.render_as_string(hide_password=False), pool_size=1)
    store = LeaseStore(engine)
    raw = Raw(backend, proxied)
    out = {}
    for n in sizes:
        prefix = f"limit-rt-{secrets.token_hex(3)}"
        names = {path: [f"{prefix}-{path}-{i:04d}" for i in range(n)] for path in "cr"}

        def requests(slot: int) -> list[AcquireRequest]:
            return [
                AcquireRequest(name=name, slot=slot, ttl=TTL, holder="bench", tolerance=1.0)
                for name in names["c"]  # noqa: B023 (called within this iteration)
            ]

        trips = []
        for slot in (base + 1, base + 2):  # the first one warms (connects, creates the rows)
            before = proxy.requests
            cronlease_tick(store, requests(slot))
            time.sleep(0.05)
            c_trips = proxy.requests - before
            before = proxy.requests
            raw.tick(names["r"], slot, "bench")
            time.sleep(0.05)
            trips.append((c_trips, proxy.requests - before))
        out[n] = trips[-1]
        base += 10
    raw.close()
    store.dispose()
    return out


# --- main --------------------------------------------------------------------------


def _short(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


COLUMNS = ("calls", "executions", "trips", "xacts", "us", "cpu")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgresql,mysql,sqlite")
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    header("limit: one batched tick, cronlease vs the two statements of the protocol")
    rows = []
    figures: dict[str, float] = {}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as tmp, own_database(backend, Path(tmp)) as url:
            runs = [run_once(backend, url, sizes, args.rounds) for _ in range(args.runs)]
        for n in sizes:
            med = {key: median(run[n][key] for run in runs) for key in runs[0][n]}
            ratio = med["cronlease_us"] / med["raw_us"]
            rows.append(
                [
                    backend,
                    n,
                    *(f"{med['cronlease_' + c]:g} / {med['raw_' + c]:g}" for c in COLUMNS[:4]),
                    med["cronlease_us"],
                    med["raw_us"],
                    f"{ratio:.2f}x",
                    f"{_short(med['cronlease_cpu'])} / {_short(med['raw_cpu'])}",
                    f"{med['cronlease_won']:.0%} / {med['raw_won']:.0%}",
                ]
            )
            for column in COLUMNS:
                per = "per_task" if column in ("us", "cpu") else "per_tick"
                for path in ("cronlease", "raw"):
                    figures[f"{backend}.n{n}.{path}_{column}_{per}"] = med[f"{path}_{column}"]
            figures[f"{backend}.n{n}.ratio_us_per_task"] = ratio
    table(
        [
            "backend",
            "N",
            "driver calls",
            "executions",
            "round trips",
            "transactions",
            "cronlease µs/task",
            "raw µs/task",
            "ratio",
            "client CPU µs/task",
            "won",
        ],
        rows,
    )
    print(
        f"medians of {args.runs} runs x {args.rounds} alternating rounds; counts per tick as"
        " cronlease / raw; a tick = acquire all N + finish (release) the winners;"
        " µs/task = the whole tick / N"
    )
    write_json(args.json, "limit", figures)


if __name__ == "__main__":
    main()
