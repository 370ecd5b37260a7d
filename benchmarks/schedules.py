"""Schedules kept in the database: what following them costs a replica.

- **poll, nothing changed**: one replica's poll (``SchedulePoll.poll``) when no row
  changed: statements sent (counted at the driver) and time, median of many;
- **load 10,000 rows**: a replica's first poll of a namespace of 10,000 rows (read,
  checked and declared as tasks, :func:`cronlease._schedules.rows.declare`; wall time
  and this process's CPU time), and a real ``Scheduler`` from ``start()`` until all
  10,000 fire.

The rows are inserted in bulk (not through the model, whose per-row transaction and
check are not what is measured here) into a namespace of their own, deleted after.

    python benchmarks/schedules.py [--backends sqlite,postgresql,mysql] [--rows 10000]

``--see 8,32``: **time to see a change** instead. On a PostgreSQL cluster of its own
(benchmarks/_cluster.py), R replica processes each offer the job and run one schedule
row; the row's arguments are changed ``--changes`` times through ``cronlease.Schedules``,
and for each replica and change the time from the write's commit (when ``update``
returned) to the replica's "schedule ... changed (version N)" log line (its record's
time; the replicas' clocks are this host's). p50/p95/max per fleet size and poll
interval (``--poll 5,1``). The polls are not aligned: each replica's runs from its own
start, so a change waits up to one interval, half of one on average.

    python benchmarks/schedules.py --see 8,32 [--poll 5,1] [--changes 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

from _cluster import Cluster, start_replicas, stop_replicas
from _common import (
    ROOT,
    header,
    median,
    percentile,
    table,
    url_for,
    watch_statements,
    write_json,
)
from sqlalchemy import delete, insert

from cronlease import RunContext, Scheduler, Schedules
from cronlease._events import EventBus
from cronlease._lease.schema import jobs, schedule_changes, schedules
from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping.schedule_poll import SchedulePoll
from cronlease._run.replica_log.outage import OutageLog
from cronlease._schedules.jobs import Jobs
from cronlease._schedules.rows import encode, normalized
from cronlease._stats import Stats


def export(ctx: RunContext, customer: str) -> None:
    """The job every row runs."""


def fill(store: LeaseStore, namespace: str, count: int) -> None:
    values = encode(normalized(job="export", every="1h", kwargs={"customer": "c"}))
    rows = [
        {
            "name": f"{namespace}:s{i:05d}",
            "namespace": namespace,
            "version": 1,
            "changed_by": "bench",
            "changed_at": time.time(),
            **values,
        }
        for i in range(count)
    ]
    with store.engine.begin() as conn:
        for start in range(0, count, 1000):
            conn.execute(insert(schedules), rows[start : start + 1000])
        conn.execute(
            insert(schedule_changes).values(
                namespace=namespace,
                name=f"{namespace}:s00000",
                version=1,
                action="add",
                changed_by="bench",
                changed_at=time.time(),
                changes="{}",
            )
        )


def clean(store: LeaseStore, namespace: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(delete(schedules).where(schedules.c.namespace == namespace))
        conn.execute(delete(schedule_changes).where(schedule_changes.c.namespace == namespace))
        conn.execute(delete(jobs).where(jobs.c.namespace == namespace))


def measure(backend: str, count: int, polls: int, tmp: Path) -> dict[str, float]:
    url = url_for(backend, tmp)
    store = LeaseStore.from_url(url)
    store.create_tables()
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    registry = Jobs({"export": export})
    loaded: dict[str, object] = {}
    poll = SchedulePoll(
        store,
        namespace,
        "bench-holder",
        registry,
        lambda: (),
        lambda removed, added: loaded.update(added),
        OutageLog(Stats(), EventBus()),
    )
    try:
        fill(store, namespace, count)
        started, cpu = time.perf_counter(), time.process_time()
        poll.poll()
        load = time.perf_counter() - started
        # this process's CPU (the replica's share; a server's is its own): on a host shared
        # with other work, the figure that wall-clock time inflates least
        load_cpu = time.process_time() - cpu
        assert len(loaded) == count, len(loaded)
        sent: list[str] = []
        times = []
        with watch_statements(store.engine, lambda statement, *_: sent.append(statement)):
            for _ in range(polls):
                started = time.perf_counter()
                assert poll.poll() is False
                times.append(time.perf_counter() - started)
        scheduler = Scheduler(engine=store.engine, namespace=namespace, schedule_poll=3600)
        scheduler.register(export)
        started = time.perf_counter()
        scheduler.start()
        while len(scheduler._dynamic) < count:
            time.sleep(0.005)
        replica = time.perf_counter() - started
        scheduler.shutdown()
        return {
            "poll_statements": len(sent) / polls,
            "poll_us": median(times) * 1e6,
            "load_s": load,
            "load_cpu_s": load_cpu,
            "replica_start_s": replica,
        }
    finally:
        clean(store, namespace)
        store.dispose()


#: the row every replica of the "time to see a change" fleet runs
SEEN = "seen"


class _Seen(logging.Handler):
    """In a replica: prints ``seen VERSION TIME`` for each "schedule ... changed" line."""

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 3
            and args[1] == "changed"
            and str(record.msg).startswith("schedule %r %s (version %d)")
        ):
            print(f"seen {args[2]} {record.created}", flush=True)


def see_replica(url: str, namespace: str, poll: float) -> None:
    """``--replica CODE URL NAMESPACE POLL``: a replica that offers ``export`` and says
    when it applies a changed row; ``started`` once it runs."""
    logging.getLogger("cronlease").addHandler(_Seen())
    logging.getLogger("cronlease").setLevel(logging.INFO)
    scheduler = Scheduler(url, namespace=namespace, schedule_poll=poll)
    scheduler.register(export)
    scheduler.start()
    print("started", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    scheduler.shutdown()


def see_fleet(
    cluster: Cluster, replicas: int, poll: float, changes: int
) -> tuple[list[float], float]:
    """Seconds from each change's commit to each replica applying it; the load average
    (1 min) at the end."""
    namespace = f"see-{uuid.uuid4().hex[:8]}"
    model = Schedules(cluster.url("see-writer"), namespace=namespace, jobs={"export": export})
    model.add(SEEN, job="export", every="1h", kwargs={"customer": "c0"})
    procs = start_replicas(
        __file__,
        ROOT,
        [[cluster.url(f"see-{n}"), namespace, str(poll)] for n in range(replicas)],
    )
    seen: list[dict[int, float]] = [{} for _ in procs]

    def read(n: int) -> None:
        stdout = procs[n].stdout
        assert stdout is not None
        for line in stdout:
            word, version, at = line.split()
            if word == "seen":
                seen[n][int(version)] = float(at)

    readers = [threading.Thread(target=read, args=(n,), daemon=True) for n in range(replicas)]
    for reader in readers:
        reader.start()
    delays: list[float] = []
    try:
        for change in range(changes):
            # a random phase against the replicas' polls
            time.sleep(random.uniform(0, poll))
            row = model.update(SEEN, kwargs={"customer": f"c{change + 1}"})
            committed = time.time()
            deadline = committed + 3 * poll + 30
            while not all(row.version in mine for mine in seen):
                if time.time() > deadline:
                    missing = sum(row.version not in mine for mine in seen)
                    raise SystemExit(f"{missing} replicas did not see version {row.version}")
                time.sleep(0.05)
            delays += [mine[row.version] - committed for mine in seen]
        load = os.getloadavg()[0]
    finally:
        errors = stop_replicas(procs)
        model.close()
    bad = [e for e in errors if "Traceback" in e]
    if bad:
        raise SystemExit(f"a replica failed: {bad[0]}")
    return delays, load


def see(sizes: list[int], polls: list[float], changes: int, json_path: str | None) -> None:
    header("schedule rows: time from a change's commit to each replica applying it")
    cluster = Cluster({"max_connections": str(max(sizes) * 3 + 20)})
    rows, figures = [], {}
    try:
        for poll in polls:
            for replicas in sizes:
                delays, load = see_fleet(cluster, replicas, poll, changes)
                p50, p95 = percentile(delays, 0.5), percentile(delays, 0.95)
                rows.append([replicas, poll, len(delays), p50, p95, max(delays), load])
                figures.update(
                    {
                        f"see_{replicas}_{poll:g}s_p50": p50,
                        f"see_{replicas}_{poll:g}s_p95": p95,
                        f"see_{replicas}_{poll:g}s_max": max(delays),
                    }
                )
    finally:
        cluster.close()
    table(
        ["replicas", "poll, s", "samples", "p50, s", "p95, s", "max, s", "load (1 min) at end"],
        rows,
    )
    write_json(json_path, "schedules_see", figures)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replica":
        see_replica(sys.argv[3], sys.argv[4], float(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--rows", type=int, default=10_000)
    # fewer than FULL_READ_EVERY: every one of them finds nothing changed
    parser.add_argument("--polls", type=int, default=50)
    parser.add_argument("--see", help="fleet sizes: time to see a change (e.g. 8,32)")
    parser.add_argument("--poll", default="5,1", help="with --see: poll intervals, s")
    parser.add_argument("--changes", type=int, default=5, help="with --see: changes each")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.see:
        sizes = [int(n) for n in args.see.split(",")]
        see(sizes, [float(p) for p in args.poll.split(",")], args.changes, args.json)
        return
    header(f"schedule rows: a poll when nothing changed, and loading {args.rows} rows")
    rows, figures = [], {}
    with TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            found = measure(backend, args.rows, args.polls, Path(tmp))
            rows.append(
                [
                    backend,
                    found["poll_statements"],
                    found["poll_us"],
                    found["load_s"],
                    found["load_cpu_s"],
                    found["replica_start_s"],
                ]
            )
            figures.update({f"{backend}_{key}": value for key, value in found.items()})
    table(
        [
            "backend",
            "statements per poll (unchanged)",
            "µs per poll (median)",
            f"first poll of {args.rows} rows, s",
            "its CPU, s",
            f"Scheduler.start() until {args.rows} fire, s",
        ],
        rows,
    )
    write_json(args.json, "schedules", figures)


if __name__ == "__main__":
    main()
