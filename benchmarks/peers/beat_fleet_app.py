"""The Celery app of beat_fleet.py: ``BEAT_FLEET_ENTRIES`` beat entries every second,
sent by cronlease replicas (``cronlease run --celery-app beat_fleet_app:app``) or by
Celery beats with RedBeat's scheduler, run by one worker that records each run in a
Redis list (the ledger).

Imported by three Pythons (cronlease's, the worker's, RedBeat's virtualenv): it needs
only Celery, redis-py and the standard library.

Every message is stamped by the process that publishes it (``before_task_publish``,
which Celery fires in beat and in ``app.send_task`` alike) with its pid and the time of
sending, so the ledger tells who sent each tick and when, whatever the worker's delay.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import before_task_publish

SYSTEM = os.environ.get("BEAT_FLEET_SYSTEM", "cronlease")
ENTRIES = int(os.environ.get("BEAT_FLEET_ENTRIES", "200"))
PORT = int(os.environ.get("BEAT_FLEET_REDIS_PORT", "6391"))
BROKER_DB, REDBEAT_DB, LEDGER_DB = 0, 1, 2
LEDGER = "ledger"

app = Celery("beat_fleet", broker=f"redis://127.0.0.1:{PORT}/{BROKER_DB}")
app.conf.beat_schedule = {
    f"e{i:04d}": {"task": "beat_fleet_app.tick", "schedule": 1.0, "args": (f"e{i:04d}",)}
    for i in range(ENTRIES)
}
app.conf.redbeat_redis_url = f"redis://127.0.0.1:{PORT}/{REDBEAT_DB}"
app.conf.worker_hijack_root_logger = False
app.conf.worker_prefetch_multiplier = 64
if SYSTEM == "redbeatfast":
    # RedBeat's default lock timeout is 5 x beat_max_loop_interval (300 s): 25 minutes
    # before a standby may take over; here 10 s, and the standby retries every 2 s
    app.conf.redbeat_lock_timeout = 10
    app.conf.beat_max_loop_interval = 2


@before_task_publish.connect  # type: ignore[untyped-decorator]  # Celery is untyped
def _stamp(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None:
        headers["bench_sender"] = os.getpid()
        headers["bench_sent_at"] = time.time()


_ledger: tuple[int, redis.Redis] | None = None


def _client() -> redis.Redis:
    """One connection per worker process (made after the fork)."""
    global _ledger
    if _ledger is None or _ledger[0] != os.getpid():
        _ledger = (os.getpid(), redis.Redis(host="127.0.0.1", port=PORT, db=LEDGER_DB))
    return _ledger[1]


@app.task(name="beat_fleet_app.tick", bind=True)  # type: ignore[untyped-decorator]
def tick(self: Any, entry: str) -> None:
    headers = self.request.headers or {}
    get = headers.get if headers else lambda key: getattr(self.request, key, None)
    row = {
        "entry": entry,
        "slot": get("cronlease_scheduled_for"),
        "sender": get("bench_sender"),
        "sent_at": get("bench_sent_at"),
        "ran_at": time.time(),
    }
    _client().rpush(LEDGER, json.dumps(row))
