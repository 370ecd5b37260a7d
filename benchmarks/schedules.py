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
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

from _common import header, median, table, url_for, watch_statements, write_json
from sqlalchemy import delete, insert

from cronlease import RunContext, Scheduler
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--rows", type=int, default=10_000)
    # fewer than FULL_READ_EVERY: every one of them finds nothing changed
    parser.add_argument("--polls", type=int, default=50)
    parser.add_argument("--json")
    args = parser.parse_args()
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
